// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import CuffTestSupport
import Testing
@testable import Sinks

/// A protocol whose results name their own source (`"characteristic":"vendor-x"`): one value
/// byte, the systolic pressure.
private struct VendorX: CuffProtocol {
    static let source = RecordCharacteristic.named("vendor-x")
    var id: CuffProtocolID { "vendor-x" }
    var summary: String { "a store test's protocol" }
    func match(_ offer: DeviceOffer) -> ProtocolMatch? { nil }
    func makeCentral(configuration: CuffSessionConfiguration) -> any CuffProtocolSession {
        CuffCentral(configuration: configuration)
    }

    static func record(_ raw: [UInt8], device: DeviceInfo, at: EventTime, stored: Bool) -> MeasurementRecord {
        var r = MeasurementRecord(
            characteristic: source, raw: raw, unit: .mmHg, systolic: SFloat(Double(raw[0])), diastolic: .nan,
            meanArterialPressure: .nan, pulseRate: nil, timestamp: nil, userID: nil, status: nil, warnings: [],
            device: device,
            receivedAt: at, stored: stored, sequenceNumber: nil,
            decoded: .object([
                ("type", .string("measurement")), ("characteristic", .string("vendor-x")),
                ("systolic", .int(Int64(raw[0]))),
            ]))
        r.stored = stored
        return r
    }

    func storedRecord(
        _ characteristic: RecordCharacteristic, raw: [UInt8], device: DeviceInfo, receivedAt: EventTime, stored: Bool,
        sequenceNumber: UInt16?
    ) -> MeasurementRecord? {
        guard characteristic == Self.source, raw.count == 1 else { return nil }
        return Self.record(raw, device: device, at: receivedAt, stored: stored)
    }
}

@Suite struct NamedSourceStoreTests {
    @Test func aNamedSourceRoundTripsThroughTheStore() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        final class Warnings: @unchecked Sendable { var messages: [String] = [] }
        let warnings = Warnings()
        let store = try SQLiteStore(path: dir.path("n.db"), warn: { warnings.messages.append($0.message) })
        let m = VendorX.record([131], device: Vectors.device, at: Vectors.at, stored: false)
        try store.write(.measurement(m))
        #expect(warnings.messages.isEmpty, "\(warnings.messages)")
        let row = try #require(try store.history().first)
        #expect(row.characteristic == VendorX.source && row.characteristic.uuidString == "vendor-x" && row.raw == [131])
        var protocols = CuffProtocolRegistry.builtIn
        protocols.register(VendorX())
        let back = try row.record(protocols: protocols)
        #expect(back.json == m.json && back.dedupKey == m.dedupKey)
        // Without the protocol registered the row cannot be decoded again: a clear error, no guess.
        #expect(throws: BPSDecodingError.self) { _ = try row.record() }
    }
}
