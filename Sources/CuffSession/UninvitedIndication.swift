// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import GATT

/// What a session that follows another protocol (Omron's, a vendor's) does with an indication
/// it did not ask for. A cuff deletes what was confirmed, so an indication is confirmed only when
/// what it carried is kept, or when it is known to carry no reading; the standard session's rule
/// (``CuffCentral``), for sessions that do not read the Blood Pressure Service themselves.
///
/// Pure: the discovered database, the handle and value in; a verdict out.
enum UninvitedIndication: Sendable, Hashable {
    /// A standard measurement: emit it (durable), then confirm.
    case keep(MeasurementRecord, log: String)
    /// Carries no reading (Service Changed, a vendor's characteristic) or a value that can never
    /// be kept (malformed): confirm, saying so without its bytes.
    case confirm(log: String)
    /// Not known to carry no reading, and not kept: left unconfirmed, so the cuff keeps it.
    case leave(log: String)

    static func classify(handle: UInt16, value: [UInt8], profile: GATTProfile?, device: DeviceInfo, at: EventTime)
        -> UninvitedIndication
    {
        let h = "0x" + String(handle, radix: 16)
        guard let profile else {
            return .leave(
                log: "indication from handle \(h) before discovery ended: not confirmed, so the cuff keeps it")
        }
        guard let ch = profile.characteristic(valueHandle: handle) else {
            return .leave(log: "indication from handle \(h), which is no characteristic of this device: not confirmed")
        }
        switch ch.uuid.uuid16.flatMap(CuffCharacteristic.init(uuid16:)) {
        case .bloodPressureMeasurement?:
            do {
                let d = try BloodPressureMeasurement.decode(value[...])
                let r = MeasurementRecord.from(
                    bpm: d.value, warnings: d.warnings, raw: value, device: device, at: at, stored: true)
                return .keep(r, log: "a Blood Pressure Measurement indicated at handle \(h): kept, then confirmed")
            } catch {
                return .confirm(log: malformed("Blood Pressure Measurement", value.count, error))
            }
        case .enhancedBloodPressureMeasurement?:
            do {
                let d = try EnhancedBloodPressureMeasurement.decode(value[...], cuffPressure: false)
                guard
                    let r = MeasurementRecord.from(
                        enhanced: d.value, warnings: d.warnings, raw: value, device: device, at: at, stored: true,
                        sequenceNumber: nil)
                else {
                    return .confirm(log: "indication from \(ch.uuid) at handle \(h) confirmed (it carries no reading)")
                }
                return .keep(
                    r, log: "an Enhanced Blood Pressure Measurement indicated at handle \(h): kept, then confirmed")
            } catch {
                return .confirm(log: malformed("Enhanced Blood Pressure Measurement", value.count, error))
            }
        case .bloodPressureRecord?, .recordAccessControlPoint?:
            // Stored records come in segments this session does not assemble.
            return .leave(
                log:
                    "indication from \(ch.uuid) at handle \(h) (stored records this session does not read): not confirmed, so the cuff keeps them"
            )
        default:
            return .confirm(log: "indication from \(ch.uuid) at handle \(h) confirmed (it carries no reading)")
        }
    }

    /// The verdict as a session's outputs, in order: what was decided, the record (durable before
    /// anything later is sent), then the confirmation.
    func outputs<O>(log: (String) -> O, measurement: (MeasurementRecord) -> O, confirmation: () -> [O]) -> [O] {
        switch self {
        case let .keep(record, text): [log(text), measurement(record)] + confirmation()
        case let .confirm(text): [log(text)] + confirmation()
        case let .leave(text): [log(text)]
        }
    }

    /// The warning for a measurement that does not decode: what was wrong and how long it was,
    /// never its bytes (they are health data). Such a value is confirmed, as the standard asks of
    /// every indication: no session could ever keep it, and an unconfirmed indication stalls the
    /// cuff's queue, so every later reading would wait behind it.
    static func malformed(_ what: String, _ count: Int, _ error: BPSDecodingError) -> String {
        "warning: a malformed \(what) (\(count) bytes; \(error.code.rawValue): \(error.message)) cannot be kept as a reading; confirmed"
    }
}
