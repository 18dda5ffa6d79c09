// SPDX-License-Identifier: GPL-2.0-or-later

/// A pressure or pulse as a record gave it: a number, a special SFLOAT value (`NaN`, `NRes`,
/// `+INF`, `-INF`, `reserved`), or nothing at all. Only numbers are ever drawn.
public enum PlotValue: Sendable, Hashable {
    case number(Double)
    case special(String)
    case missing

    public var number: Double? { if case let .number(v) = self, v.isFinite { v } else { nil } }

    /// `119`, `15.9`, or the special value's name; "—" when missing.
    public var text: String {
        switch self {
        case let .number(v): SVGNumber.format(v, decimals: 1)
        case let .special(s): s
        case .missing: "—"
        }
    }
}

public enum PressureUnitName: String, Sendable, Hashable {
    case mmHg
    case kPa

    /// mmHg per kPa (1 kPa = 1000 Pa; 1 mmHg = 133.322 Pa).
    public static let mmHgPerKPa = 1000.0 / 133.322387415
}

/// The Measurement Status bits of a result.
public struct StatusFlags: Sendable, Hashable {
    public var bodyMovement = false
    public var cuffTooLoose = false
    public var irregularPulse = false
    public var improperPosition = false
    /// `in_range`, `above_upper_limit`, `below_lower_limit` or `reserved`.
    public var pulseRateRange = "in_range"

    public init(
        bodyMovement: Bool = false, cuffTooLoose: Bool = false, irregularPulse: Bool = false,
        improperPosition: Bool = false, pulseRateRange: String = "in_range"
    ) {
        self.bodyMovement = bodyMovement
        self.cuffTooLoose = cuffTooLoose
        self.irregularPulse = irregularPulse
        self.improperPosition = improperPosition
        self.pulseRateRange = pulseRateRange
    }

    /// Names of the flags that are set, in the order of the status bits.
    public var setNames: [String] {
        var out: [String] = []
        if bodyMovement { out.append("body movement") }
        if cuffTooLoose { out.append("cuff too loose") }
        if irregularPulse { out.append("irregular pulse") }
        switch pulseRateRange {
        case "in_range": break
        case "above_upper_limit": out.append("pulse above upper limit")
        case "below_lower_limit": out.append("pulse below lower limit")
        default: out.append("pulse range \(pulseRateRange)")
        }
        if improperPosition { out.append("improper position") }
        return out
    }
}

/// The cuff as the records name it.
public struct DeviceLabel: Sendable, Hashable {
    public var address: String?
    public var name: String?
    public var manufacturer: String?
    public var model: String?
    public var serial: String?

    public init(
        address: String? = nil, name: String? = nil, manufacturer: String? = nil, model: String? = nil,
        serial: String? = nil
    ) {
        self.address = address
        self.name = name
        self.manufacturer = manufacturer
        self.model = model
        self.serial = serial
    }

    /// `cuff-sim (cuff project CUFF-SIM 1) 00:AA:01:00:00:00`, from what is known.
    public var text: String {
        var parts: [String] = []
        if let name { parts.append(name) }
        let make = [manufacturer, model].compactMap { $0 }.joined(separator: " ")
        if !make.isEmpty { parts.append(parts.isEmpty ? make : "(" + make + ")") }
        if let address { parts.append(address) }
        return parts.isEmpty ? "unknown cuff" : parts.joined(separator: " ")
    }

    /// Fills what this label lacks from `other`.
    public mutating func merge(_ other: DeviceLabel) {
        address = address ?? other.address
        name = other.name ?? name
        manufacturer = other.manufacturer ?? manufacturer
        model = other.model ?? model
        serial = other.serial ?? serial
    }
}

/// One measurement result (a `measurement` record).
public struct PlotResult: Sendable, Hashable {
    public var unit: PressureUnitName
    public var systolic: PlotValue
    public var diastolic: PlotValue
    public var meanArterialPressure: PlotValue
    public var pulseRate: PlotValue
    public var status: StatusFlags?
    /// The cuff's own time stamp (`2026-11-22T08:14:02`, no zone), if it sent one.
    public var deviceTime: String?
    /// `received_at` in seconds since 1970 (UTC).
    public var receivedAt: Double?
    public var userID: Int?
    /// A reading the cuff had stored (sent after connecting), not the one this session measured.
    public var stored: Bool

    public init(
        unit: PressureUnitName, systolic: PlotValue, diastolic: PlotValue, meanArterialPressure: PlotValue,
        pulseRate: PlotValue = .missing, status: StatusFlags? = nil, deviceTime: String? = nil,
        receivedAt: Double? = nil, userID: Int? = nil, stored: Bool = false
    ) {
        self.unit = unit
        self.systolic = systolic
        self.diastolic = diastolic
        self.meanArterialPressure = meanArterialPressure
        self.pulseRate = pulseRate
        self.status = status
        self.deviceTime = deviceTime
        self.receivedAt = receivedAt
        self.userID = userID
        self.stored = stored
    }
}

public enum Phase: String, Sendable, Hashable {
    case inflating
    case deflating
}

/// One cuff-pressure value (a `progress` record).
public struct PressureSample: Sendable, Hashable {
    public var phase: Phase
    public var pressure: PlotValue
    public var unit: PressureUnitName
    /// Seconds since the measurement started, as the record says.
    public var elapsed: Double
    /// `received_at` in seconds since 1970 (UTC).
    public var receivedAt: Double?

    public init(phase: Phase, pressure: PlotValue, unit: PressureUnitName, elapsed: Double, receivedAt: Double? = nil) {
        self.phase = phase
        self.pressure = pressure
        self.unit = unit
        self.elapsed = elapsed
        self.receivedAt = receivedAt
    }
}

/// One session: from a `session` start record to its end (or the records of one session when
/// the input has no session records).
public struct PlotSession: Sendable, Hashable {
    public var device: DeviceLabel
    /// When it started (seconds since 1970, UTC).
    public var startedAt: Double?
    public var samples: [PressureSample]
    public var results: [PlotResult]
    /// The end record's outcome and message, if there was one.
    public var outcome: String?
    public var message: String?

    public init(
        device: DeviceLabel = DeviceLabel(), startedAt: Double? = nil, samples: [PressureSample] = [],
        results: [PlotResult] = [],
        outcome: String? = nil, message: String? = nil
    ) {
        self.device = device
        self.startedAt = startedAt
        self.samples = samples
        self.results = results
        self.outcome = outcome
        self.message = message
    }

    /// The unit the cuff used: its pressure samples', else its first result's.
    public var unit: PressureUnitName { samples.first?.unit ?? results.first?.unit ?? .mmHg }
}

/// One stored reading for the history chart.
public struct HistoryReading: Sendable, Hashable {
    /// When it was taken, in seconds since 1970 of the cuff's (or the host's) local time.
    public var time: Double
    public var result: PlotResult

    public init(time: Double, result: PlotResult) {
        self.time = time
        self.result = result
    }

    /// A pressure in mmHg (kPa readings converted), nil for a special or missing value.
    public static func mmHg(_ v: PlotValue, _ unit: PressureUnitName) -> Double? {
        guard let n = v.number else { return nil }
        return unit == .kPa ? n * PressureUnitName.mmHgPerKPa : n
    }

    public var systolicMmHg: Double? { HistoryReading.mmHg(result.systolic, result.unit) }
    public var diastolicMmHg: Double? { HistoryReading.mmHg(result.diastolic, result.unit) }
    public var pulse: Double? { result.pulseRate.number }
}
