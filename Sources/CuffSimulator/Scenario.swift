// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure

/// What the simulated cuff does, by name (`cuff simulate --scenario NAME`).
public enum Scenario: String, Sendable, Hashable, CaseIterable {
    case normal
    case hypertensive
    case irregularPulse = "irregular-pulse"
    case bodyMovement = "body-movement"
    case cuffLoose = "cuff-loose"
    case improperPosition = "improper-position"
    case error
    case kpa
    case storedRecords = "stored-records"
    case disconnect
    case slowConfirm = "slow-confirm"
    case beurerBM85 = "beurer-bm85"
    case rfuBits = "rfu-bits"
    case hypotensive
    case multiUser = "multi-user"

    /// The cuff sends every stored reading again after each subscription, also the ones the
    /// client already confirmed. No scenario does: a faithful cuff sends a stored reading until
    /// the client confirms it, then not again to that client.
    public var resendsConfirmedReadings: Bool { false }

    public var summary: String {
        switch self {
        case .normal: "a normal reading, about 120/80 mmHg, pulse about 72"
        case .hypertensive: "a high reading, about 165/102 mmHg, pulse above the upper limit"
        case .irregularPulse: "irregular pulse detected (status bit 2), uneven oscillations"
        case .bodyMovement: "body movement during the measurement (status bit 0), pressure spikes"
        case .cuffLoose: "cuff too loose (status bit 1)"
        case .improperPosition: "improper measurement position (status bit 5)"
        case .error: "the cuff fails (\"Err\"): every value NaN, status 0"
        case .kpa: "cuff pressure and result in kPa"
        case .storedRecords:
            "three stored readings sent right after subscription until a client confirmed them, oldest first (with bps-1.1, by RACP only: a client that asks for none gets none), then a live one"
        case .disconnect: "the link drops in the middle of the deflation"
        case .slowConfirm:
            "five stored readings queued at once; one indication in flight, link dropped if a confirmation is missing for 30 s"
        case .beurerBM85: "a Beurer BM85: user ID without its flag, pulse and status big-endian"
        case .rfuBits: "reserved bits set in flags and measurement status"
        case .hypotensive: "a low reading, about 88/56 mmHg, pulse below the lower limit"
        case .multiUser: "a reading for user 2, after a stored reading of user 1"
        }
    }
}

/// Which Blood Pressure Service version the cuff implements.
public enum Persona: String, Sendable, Hashable, CaseIterable {
    /// BPS 1.0: BPM, ICP, Feature.
    case bps10 = "bps-1.0"
    /// BPS 1.1: also Enhanced BPM, Enhanced ICP, Blood Pressure Record and RACP.
    case bps11 = "bps-1.1"
}

/// A reading the simulated cuff produces.
struct Reading: Sendable, Hashable {
    var systolic: Double
    var diastolic: Double
    var pulse: Double
    var status: MeasurementStatus
    var userID: UInt8 = 1
    /// The cuff failed ("Err"): sent with every pressure NaN and status 0.
    var failed = false
    var map: Double { ((diastolic * 2 + systolic) / 3).rounded() }
}
