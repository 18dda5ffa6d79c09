// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import Omron

extension MeasurementRecord {
    /// A record from one Omron memory slot: the usual `measurement` shape with `"characteristic":"omron"`,
    /// the cuff's local time as `timestamp`, the user's number (1-based) and the slot bytes in `raw`.
    public static func from(
        omron r: OmronReading, profile: OmronProfile, user: Int?, slot: Int?, raw: [UInt8], device: DeviceInfo,
        at: EventTime
    ) -> MeasurementRecord {
        var status = MeasurementStatus(rawValue: 0)
        if r.bodyMovement { status = MeasurementStatus(rawValue: status.rawValue | 1) }
        if r.cuffOK == false { status = MeasurementStatus(rawValue: status.rawValue | 2) }
        if r.irregularPulse { status = MeasurementStatus(rawValue: status.rawValue | 4) }
        if let p = r.position, p != 0 { status = MeasurementStatus(rawValue: status.rawValue | 0x20) }
        let iso = r.time.iso8601
        return MeasurementRecord(
            characteristic: .named("omron"), raw: raw, unit: .mmHg, systolic: SFloat(Double(r.systolic)),
            diastolic: SFloat(Double(r.diastolic)), meanArterialPressure: .nan, pulseRate: SFloat(Double(r.pulse)),
            timestamp: iso, userID: user.map { UInt8(clamping: $0) }, status: status, warnings: [], device: device,
            receivedAt: at,
            stored: true, sequenceNumber: r.sequence,
            decoded: r.json(profile: profile, user: user, slot: slot, raw: raw))
    }
}
