// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession

/// One row of the `measurements` table, with its device.
///
/// Pressures are in the row's `unit` (as received, not converted); a special SFLOAT has a NULL
/// number and its name (`NaN`, `NRes`, `+INF`, `-INF`, `reserved`) in the `…Special` column. The raw
/// 16-bit words are kept too, but ``record()`` rebuilds the ``MeasurementRecord`` from `raw` with the
/// BloodPressure codec, not from these columns.
public struct StoredMeasurement: Sendable, Hashable {
    public var id: Int64
    public var device: DeviceInfo
    public var characteristic: RecordCharacteristic
    public var raw: [UInt8]
    /// The codec options under which `raw` decoded to the record's values when it was stored.
    public var quirks: QuirkProfile.Options
    public var unit: PressureUnit
    public var systolic: Double?
    public var diastolic: Double?
    public var meanArterialPressure: Double?
    public var pulseRate: Double?
    public var systolicRaw: UInt16
    public var diastolicRaw: UInt16
    public var meanArterialPressureRaw: UInt16
    public var pulseRateRaw: UInt16?
    public var systolicSpecial: String?
    public var diastolicSpecial: String?
    public var meanArterialPressureSpecial: String?
    public var pulseRateSpecial: String?
    public var timestamp: String?
    public var userID: UInt8?
    public var status: UInt16?
    public var stored: Bool
    public var sequenceNumber: UInt16?
    /// `received_at` as printed (`2026-11-22T07:31:54.123Z`) and in microseconds since 1970.
    public var receivedAt: String
    public var receivedAtMicros: Int64
    /// The offset (seconds east of UTC) the store's ``UTCOffsetPolicy`` gave this record at ingest,
    /// used again for its zone-less device time when history is printed.
    public var hostUTCOffsetSeconds: Int
    public var dedupKey: String
    /// JSON text: the decode warnings, and the codec's object for the value.
    public var warningsJSON: String
    public var decodedJSON: String

    /// A row as another store (a server) keeps it: every column of ``SQLiteStore``'s layout.
    public init(
        id: Int64, device: DeviceInfo, characteristic: RecordCharacteristic, raw: [UInt8], quirks: QuirkProfile.Options,
        unit: PressureUnit, systolic: Double?, diastolic: Double?, meanArterialPressure: Double?, pulseRate: Double?,
        systolicRaw: UInt16, diastolicRaw: UInt16, meanArterialPressureRaw: UInt16, pulseRateRaw: UInt16?,
        systolicSpecial: String?, diastolicSpecial: String?, meanArterialPressureSpecial: String?,
        pulseRateSpecial: String?,
        timestamp: String?, userID: UInt8?, status: UInt16?, stored: Bool, sequenceNumber: UInt16?, receivedAt: String,
        receivedAtMicros: Int64, hostUTCOffsetSeconds: Int, dedupKey: String, warningsJSON: String, decodedJSON: String
    ) {
        self.id = id
        self.device = device
        self.characteristic = characteristic
        self.raw = raw
        self.quirks = quirks
        self.unit = unit
        self.systolic = systolic
        self.diastolic = diastolic
        self.meanArterialPressure = meanArterialPressure
        self.pulseRate = pulseRate
        self.systolicRaw = systolicRaw
        self.diastolicRaw = diastolicRaw
        self.meanArterialPressureRaw = meanArterialPressureRaw
        self.pulseRateRaw = pulseRateRaw
        self.systolicSpecial = systolicSpecial
        self.diastolicSpecial = diastolicSpecial
        self.meanArterialPressureSpecial = meanArterialPressureSpecial
        self.pulseRateSpecial = pulseRateSpecial
        self.timestamp = timestamp
        self.userID = userID
        self.status = status
        self.stored = stored
        self.sequenceNumber = sequenceNumber
        self.receivedAt = receivedAt
        self.receivedAtMicros = receivedAtMicros
        self.hostUTCOffsetSeconds = hostUTCOffsetSeconds
        self.dedupKey = dedupKey
        self.warningsJSON = warningsJSON
        self.decodedJSON = decodedJSON
    }

    /// Decodes `raw` again with the BloodPressure codec (and the stored quirk options) into the record
    /// a session would have produced. `receivedAt.monotonic` is not stored; it is set to the wall time.
    /// Another protocol's record (a non-BPS ``characteristic``) is rebuilt by the protocol of
    /// `protocols` that names its source.
    public func record(protocols: CuffProtocolRegistry = .builtIn) throws(BPSDecodingError) -> MeasurementRecord {
        let at = EventTime(monotonic: Timestamp(nanoseconds: receivedAtMicros &* 1000), wallMicros: receivedAtMicros)
        switch characteristic {
        case .bloodPressureMeasurement:
            let d = try BloodPressureMeasurement.decode(raw[...], quirks: quirks)
            return MeasurementRecord.from(
                bpm: d.value, warnings: d.warnings, raw: raw, device: device, at: at, stored: stored)
        case .enhancedBloodPressureMeasurement, .bloodPressureRecord:
            let seq = characteristic == .bloodPressureRecord ? sequenceNumber : nil
            if characteristic == .bloodPressureRecord && seq == nil {
                throw BPSDecodingError(
                    .invalidValue, field: "Sequence Number", offset: 0, detail: "a stored 2B36 record needs one")
            }
            let d = try EnhancedBloodPressureMeasurement.decode(raw[...], cuffPressure: false)
            guard
                let r = MeasurementRecord.from(
                    enhanced: d.value, warnings: d.warnings, raw: raw, device: device, at: at, stored: stored,
                    sequenceNumber: seq)
            else {
                throw BPSDecodingError(
                    .invalidValue, field: "Enhanced Blood Pressure Measurement", offset: 0, detail: "not a measurement")
            }
            return r
        default:
            // Another protocol's record: rebuilt by the protocol that names its source.
            if let r = protocols.storedRecord(
                characteristic, raw: raw, device: device, receivedAt: at, stored: stored,
                sequenceNumber: sequenceNumber, userID: userID)
            {
                return r
            }
            throw BPSDecodingError(.unsupported, field: "characteristic \(characteristic.uuidString)", offset: 0)
        }
    }
}
