import BloodPressure
import CuffCore
import CuffSession
import Testing

@testable import CuffRuntime

/// The mark `cuff watch` asks a cuff's RACP for records after (``Collector/lastSequenceNumber(address:)``).
@Suite struct CollectorSequenceTests {
    static let device = DeviceInfo(address: "AA:BB:CC:DD:EE:01")

    static func reading(stored: Bool, sequence: UInt16?, systolic: Double = 121) -> MeasurementRecord {
        MeasurementRecord(
            characteristic: .bloodPressureMeasurement, raw: [0x1E], unit: .mmHg, systolic: SFloat(systolic),
            diastolic: SFloat(79), meanArterialPressure: SFloat(93), pulseRate: SFloat(70),
            timestamp: "2026-11-29T10:00:00", userID: 1, status: nil, warnings: [], device: device,
            receivedAt: EventTime(monotonic: .seconds(1), wallMicros: 1_000_000), stored: stored,
            sequenceNumber: sequence, decoded: .object([]))
    }

    /// Probe S: a reading kept live comes back from the cuff's memory as a stored record with a
    /// sequence number; it is a repeat, and it moved no mark, so every later session asked for it
    /// (and all the others) again: 202,632 repeats for 3,817 readings on a 20-cuff fleet.
    @Test func aStoredRepeatOfAKeptReadingMovesTheMark() {
        let collector = Collector(commit: { _ in }, write: { _ in })
        collector.queue.append((.measurement(Self.reading(stored: false, sequence: nil)), nil))
        collector.flush()
        #expect(collector.stored == 1)
        #expect(collector.lastSequenceNumber(address: Self.device.address) == nil)
        collector.queue.append((.measurement(Self.reading(stored: true, sequence: 5)), nil))
        collector.flush()
        #expect(collector.duplicates == 1)
        #expect(collector.lastSequenceNumber(address: Self.device.address) == 5)
    }

    /// A commit that fails keeps the mark where it was: the readings of that turn are not kept.
    @Test func aFailedCommitMovesNoMark() {
        struct Full: Error {}
        let collector = Collector(commit: { _ in throw Full() }, write: { _ in })
        collector.queue.append((.measurement(Self.reading(stored: true, sequence: 9)), nil))
        collector.queue.append((.measurement(Self.reading(stored: true, sequence: 9)), nil))  // its repeat in the turn
        collector.flush()
        #expect(collector.stored == 0)
        #expect(collector.lastSequenceNumber(address: Self.device.address) == nil)
    }
}
