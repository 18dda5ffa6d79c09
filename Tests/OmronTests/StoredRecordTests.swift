import BloodPressure
import Foundation
import CuffCore
import CuffSession
import CuffSimulator
import Testing
@testable import Omron

/// A kept Omron row rebuilt through the seam (`CuffProtocolRegistry.storedRecord`), as
/// `StoredMeasurement.record()` does for history, plots and the outboxes.
@Suite("Omron records rebuilt from a store's row")
struct StoredRecordTests {
    /// The records a sync printed, rebuilt from what a store keeps (raw, device, user), are the
    /// same but for the slot number the store does not keep.
    @Test(arguments: ["HEM-7361T", "HEM-7600T", "HEM-6410T", "HEM-9700T", "HEM-7142T2"])
    func rebuiltAsTheSyncPrintedThem(model: String) throws {
        let p = try #require(OmronCatalog.profile(named: model))
        var peripheral = OmronPeripheral(
            cuff: OmronSimulator(profile: p, seed: 8, localSeconds: localNow), localAtPowerOn: localNow)
        peripheral.poweredOn(now: .zero)
        var l = GATTLink(
            p, peripheral: peripheral, options: OmronSyncOptions(allRecords: true, keepUnread: true, setTime: false))
        #expect(l.run() == .completed)
        #expect(!l.measurements.isEmpty)
        for m in l.measurements {
            let r = try #require(
                CuffProtocolRegistry.builtIn.storedRecord(
                    m.characteristic, raw: m.raw, device: m.device, receivedAt: m.receivedAt, stored: true,
                    sequenceNumber: m.sequenceNumber,
                    userID: m.userID))
            #expect(r.userID == m.userID && r.dedupKey == m.dedupKey)
            #expect(
                r.json.serialized().replacingOccurrences(of: #""slot":null"#, with: "")
                    == m.json.serialized().replacingOccurrences(
                        of: #""slot":\d+"#, with: "", options: .regularExpression))
        }
    }

    /// Not an Omron reading: another source, an empty slot, a length no profile of the model has,
    /// no model. An unknown model decodes with its closest profile, as the live session did.
    @Test func whatIsNoOmronReading() throws {
        let p = try #require(OmronCatalog.profile(named: "HEM-7361T"))
        let raw = OmronRecordCodec.encode(
            OmronReading(
                systolic: 128, diastolic: 84, pulse: 66,
                time: DateTime(year: 2026, month: 3, day: 4, hours: 7, minutes: 8, seconds: 9)),
            layout: p.layout, slotSize: p.slotSize)
        let at = EventTime(monotonic: .zero, wallMicros: 1_795_622_400_000_000)
        func rebuilt(_ raw: [UInt8], model: String?, _ c: RecordCharacteristic = .named("omron")) -> MeasurementRecord?
        {
            CuffProtocolRegistry.builtIn.storedRecord(
                c, raw: raw, device: DeviceInfo(address: "AA:BB:CC:DD:EE:FF", model: model),
                receivedAt: at, stored: true, sequenceNumber: nil, userID: 2)
        }
        let r = try #require(rebuilt(raw, model: "HEM-7361T_ESL"))
        #expect(r.systolic == SFloat(128) && r.userID == 2 && r.timestamp == "2026-03-04T07:08:09")
        #expect(rebuilt(raw, model: "HEM-7361T", .named("microlife")) == nil)
        #expect(rebuilt([UInt8](repeating: 0xFF, count: 16), model: "HEM-7361T") == nil)
        #expect(rebuilt(Array(raw.prefix(12)), model: "HEM-7361T") == nil)
        #expect(rebuilt(raw, model: nil) == nil)
        let closest = OmronCatalog.closest(to: "HEM-7361T9").id
        #expect(rebuilt(raw, model: "HEM-7361T9")?.json.serialized().contains(#""model":"\#(closest)""#) == true)
    }
}
