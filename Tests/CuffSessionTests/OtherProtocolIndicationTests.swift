import Foundation
import Testing
import BloodPressure
import CuffCore
import GATT
import Omron
import Transport
@testable import CuffSession

/// The Omron and vendor sessions do not read the Blood Pressure Service, but a real cuff may have
/// it beside its own (Omron's do) and indicate a measurement there. A cuff deletes what was
/// confirmed: such a measurement is kept, then confirmed; a value that can never be kept is
/// confirmed with a warning that carries none of its bytes. Each peer is a real GATT server over
/// a real socket (``UnsubscribedIndicationTests/serve(_:_:indicateAt:value:when:)``); it
/// indicates after the client's first write request, then hangs up.
@Suite("Indications on the standard service during another protocol's session", .serialized)
struct OtherProtocolIndicationTests {
    /// A truncated Blood Pressure Measurement (flags, then half a systolic value).
    static let malformed: [UInt8] = [0x00, 0x78]

    /// The vendor's service, then a Blood Pressure Service with a Blood Pressure Measurement;
    /// returns the database and the measurement's value handle.
    static func database(_ vendor: (inout AttributeDatabase.Builder) -> Void) -> (AttributeDatabase, UInt16) {
        var b = AttributeDatabase.Builder()
        b.addGenericAccessService(deviceName: "cuff", appearance: 0x0380)
        vendor(&b)
        b.addService(BluetoothUUID(0x1810))
        let bpm = b.addCharacteristic(BluetoothUUID(0x2A35), properties: .indicate, permissions: []).valueHandle
        return (b.build(), bpm)
    }

    static func microlife() -> (AttributeDatabase, UInt16) {
        database { b in
            b.addService(BluetoothUUID(Microlife.serviceUUID16))
            b.addCharacteristic(BluetoothUUID(Microlife.responseUUID16), properties: .notify, permissions: [])
            b.addCharacteristic(BluetoothUUID(Microlife.commandUUID16), properties: .write, permissions: .write)
        }
    }

    /// The modern (FE4A) transport of the profile an Omron session starts with (HEM-7142T2).
    static func omron() -> (AttributeDatabase, UInt16) {
        database { b in
            let t = OmronTransport.modern
            b.addService(BluetoothUUID(t.serviceUUID)!)
            for u in t.txUUIDs {
                b.addCharacteristic(
                    BluetoothUUID(u)!, properties: [.write, .writeWithoutResponse], permissions: .write)
            }
            for u in t.rxUUIDs { b.addCharacteristic(BluetoothUUID(u)!, properties: .notify, permissions: []) }
            b.addCharacteristic(BluetoothUUID(OmronUUID.unlock)!, properties: [.write, .notify], permissions: .write)
        }
    }

    /// Runs a session of `protocolID` against `db`, indicating `value` at `handle` once the client
    /// wrote something; returns whether it was confirmed, the measurements kept and the logs.
    static func run(_ protocolID: CuffProtocolID, _ db: AttributeDatabase, indicateAt handle: UInt16, value: [UInt8])
        throws -> (confirmed: Bool, kept: [MeasurementRecord], logs: [String])
    {
        let confirmed = Box(false)
        let (_, outputs, logs) = try runAgainst(
            { b in
                confirmed.value = UnsubscribedIndicationTests.serve(b, db, indicateAt: handle, value: value) { seen in
                    seen.contains { $0.first == 0x12 }
                }
                b.close()
            }, timeout: .seconds(10)
        ) { $0.forcedProtocol = protocolID }
        return (confirmed.value, UnsubscribedIndicationTests.measurements(outputs), logs)
    }

    @Test(arguments: ["microlife", "omron"])
    func aStandardMeasurementIsKeptThenConfirmed(_ name: String) throws {
        let (db, bpm) = name == "omron" ? Self.omron() : Self.microlife()
        let r = try Self.run(
            CuffProtocolID(rawValue: name), db, indicateAt: bpm, value: UnsubscribedIndicationTests.reading)
        #expect(r.confirmed, "\(r.logs)")
        #expect(
            r.kept.count == 1 && r.kept.first?.systolic.doubleValue == 120 && r.kept.first?.diastolic.doubleValue == 80,
            "confirmed but not kept: \(r.logs)")
    }

    @Test(arguments: ["microlife", "omron"])
    func anIndicationFromAHandleThatIsNoCharacteristicIsNotConfirmed(_ name: String) throws {
        let (db, _) = name == "omron" ? Self.omron() : Self.microlife()
        let r = try Self.run(
            CuffProtocolID(rawValue: name), db, indicateAt: 0x0777, value: UnsubscribedIndicationTests.reading)
        #expect(!r.confirmed, "\(r.logs)")
        #expect(r.kept.isEmpty)
        #expect(r.logs.contains { $0.contains("0x777") && $0.contains("not confirmed") }, "\(r.logs)")
    }

    /// A measurement that does not decode cannot be kept by anyone: it is confirmed (the standard
    /// asks it of every indication; unconfirmed, it would stall every later one), and the warning
    /// says what was wrong without the bytes.
    @Test(arguments: ["microlife", "omron", "bps"])
    func aMalformedMeasurementIsConfirmedWithAWarningWithoutItsBytes(_ name: String) throws {
        let (db, bpm): (AttributeDatabase, UInt16)
        switch name {
        case "omron": (db, bpm) = Self.omron()
        case "microlife": (db, bpm) = Self.microlife()
        default:
            (db, bpm) = {
                let d = UnsubscribedIndicationTests.database(); return (d.0, d.first)
            }()
        }
        let r = try Self.run(CuffProtocolID(rawValue: name), db, indicateAt: bpm, value: Self.malformed)
        #expect(r.confirmed, "\(r.logs)")
        #expect(r.kept.isEmpty)
        let warning = r.logs.filter { $0.contains("malformed Blood Pressure Measurement") }
        #expect(warning.count == 1 && warning[0].contains("2 bytes") && warning[0].contains("truncated"), "\(r.logs)")
        #expect(!r.logs.contains { $0.uppercased().contains(Hex.encode(Self.malformed).uppercased()) }, "\(r.logs)")
    }
}
