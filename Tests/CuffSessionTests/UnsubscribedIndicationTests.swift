import Foundation
import Testing
import BloodPressure
import CuffCore
import CuffRuntime
import GATT
import Transport
@testable import CuffSession

/// A cuff deletes a reading once its indication is confirmed: the client must never confirm an
/// indication whose reading it did not keep. Each peer here is a real GATT server over a real
/// socket that indicates a measurement where the client did not ask for it.
@Suite("Indications the client did not subscribe to", .serialized)
struct UnsubscribedIndicationTests {
    /// A Blood Pressure Measurement: 120/80 mmHg, MAP 93, no other fields.
    static let reading: [UInt8] = [0x00, 0x78, 0x00, 0x50, 0x00, 0x5D, 0x00]

    /// Two Blood Pressure Services, each with a Blood Pressure Measurement; the client subscribes
    /// to the first only.
    static func database() -> (AttributeDatabase, first: UInt16, second: UInt16) {
        var b = AttributeDatabase.Builder()
        b.addGenericAccessService(deviceName: "two-bps", appearance: 0x0380)
        b.addService(BluetoothUUID(0x1810))
        let first = b.addCharacteristic(BluetoothUUID(0x2A35), properties: .indicate, permissions: []).valueHandle
        b.addCharacteristic(BluetoothUUID(0x2A49), properties: .read, permissions: .read, value: [0x00, 0x00])
        b.addService(BluetoothUUID(0x1810))
        let second = b.addCharacteristic(BluetoothUUID(0x2A35), properties: .indicate, permissions: []).valueHandle
        return (b.build(), first, second)
    }

    /// Serves the database; once `trigger` says so (given the PDUs the client sent so far), sends
    /// one indication of `value` at `handle` and waits up to 3 s for the client's confirmation.
    /// Returns whether it came.
    static func serve(
        _ b: UnixSeqpacketBearer, _ db: AttributeDatabase, indicateAt handle: UInt16, value: [UInt8] = reading,
        when trigger: @escaping ([[UInt8]]) -> Bool
    ) -> Bool {
        var server = GATTServer(database: db)
        var seen: [[UInt8]] = []
        var sent = false
        var deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            guard case let .pdu(p)? = try? b.next(timeout: .milliseconds(200)) else { continue }
            seen.append(p)
            if sent && p == [0x1E] { return true }
            for a in server.receive(p, now: MonotonicClock.now()) {
                if case let .send(out) = a { try? b.send(out) }
            }
            if !sent && trigger(seen) {
                sent = true
                deadline = Date().addingTimeInterval(3)
                try? b.send([0x1D, UInt8(handle & 0xFF), UInt8(handle >> 8)] + value)
            }
        }
        return false
    }

    static func measurements(_ outputs: [SessionOutput]) -> [MeasurementRecord] {
        outputs.compactMap { if case let .measurement(m) = $0 { m } else { nil } }
    }

    @Test func aMeasurementIndicatedOnASecondInstanceIsKeptThenConfirmed() throws {
        let (db, first, second) = Self.database()
        let confirmed = Box(false)
        let (_, outputs, logs) = try runAgainst(
            { b in
                // After the client wrote the first instance's CCCD (Write Request to first + 1).
                confirmed.value = Self.serve(b, db, indicateAt: second) { seen in
                    seen.contains { $0.count >= 3 && $0[0] == 0x12 && UInt16($0[1]) | UInt16($0[2]) << 8 == first + 1 }
                }
            }, timeout: .seconds(10))
        let kept = Self.measurements(outputs)
        #expect(confirmed.value, "\(logs)")
        #expect(kept.count == 1 && kept.first?.systolic.doubleValue == 120, "confirmed but not kept: \(logs)")
        #expect(!logs.contains { $0.contains("confirmed and ignored") })
    }

    @Test func aMeasurementIndicatedBeforeDiscoveryEndedIsKeptThenConfirmed() throws {
        let (db, first, _) = Self.database()
        let confirmed = Box(false)
        let (_, outputs, logs) = try runAgainst(
            { b in
                // Right after the MTU exchange, before the client knows any handle.
                confirmed.value = Self.serve(b, db, indicateAt: first) { seen in seen.count == 1 }
            }, timeout: .seconds(10))
        let kept = Self.measurements(outputs)
        #expect(confirmed.value, "\(logs)")
        #expect(kept.count == 1, "confirmed but not kept: \(logs)")
    }

    @Test func anIndicationFromAHandleThatIsNoCharacteristicIsNotConfirmed() throws {
        let (db, first, _) = Self.database()
        let confirmed = Box(true)
        let (_, outputs, logs) = try runAgainst(
            { b in
                confirmed.value = Self.serve(b, db, indicateAt: 0x0777) { seen in
                    seen.contains { $0.count >= 3 && $0[0] == 0x12 && UInt16($0[1]) | UInt16($0[2]) << 8 == first + 1 }
                }
            }, timeout: .seconds(10))
        #expect(!confirmed.value, "\(logs)")
        #expect(Self.measurements(outputs).isEmpty)
        #expect(logs.contains { $0.contains("0x777") && $0.contains("not confirmed") }, "\(logs)")
    }
}
