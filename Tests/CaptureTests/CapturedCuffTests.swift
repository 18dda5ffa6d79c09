// SPDX-License-Identifier: GPL-2.0-or-later

import BloodPressure
import CuffCore
import CuffSession
import CuffTestSupport
import Foundation
import GATT
import Testing
@testable import Capture

/// Runs a measurement session (the live client, CuffCentral) against `peripheral`, in process, on
/// a virtual clock; returns what the session emitted.
func measure<P: GATTPeripheral>(against peripheral: P, start: Int64 = 1_790_000_000_000_000) -> [SessionOutput] {
    var p = peripheral
    var c = CuffCentral(configuration: CuffSessionConfiguration(address: "captured"))
    var now = Timestamp(nanoseconds: 1_000_000_000)
    func at() -> EventTime { EventTime(monotonic: now, wallMicros: start + now.nanoseconds / 1000) }
    var emitted: [SessionOutput] = []
    var toPeripheral: [[UInt8]] = []
    var toCentral: [[UInt8]] = []
    var linkUp = true
    func take(_ outs: [CuffCentral.Output]) {
        for o in outs {
            switch o {
            case let .send(pdu): toPeripheral.append(pdu)
            case let .emit(e): emitted.append(e)
            case .disconnect: linkUp = false
            default: break
            }
        }
    }
    func takeP(_ outs: [PeripheralOutput]) {
        for o in outs {
            switch o {
            case let .send(pdu): toCentral.append(pdu)
            case .disconnect: linkUp = false
            case .log: break
            }
        }
    }
    takeP(p.connected(now: now, client: nil))
    take(c.start(at: at()))
    var steps = 0
    while !c.isFinished, steps < 1_000_000 {
        steps += 1
        if !linkUp {
            take(c.disconnected("link closed", at: at()))
            break
        }
        if !toPeripheral.isEmpty {
            takeP(p.receive(toPeripheral.removeFirst(), now: now))
            continue
        }
        if !toCentral.isEmpty {
            take(c.receive(toCentral.removeFirst(), at: at()))
            continue
        }
        // Quiet: move the clock to the next deadline of either side.
        guard let next = [c.nextDeadline, p.nextDeadline].compactMap({ $0 }).min() else { break }
        now = max(now, next)
        takeP(p.tick(now: now))
        take(c.tick(at: at()))
    }
    return emitted
}

/// The measurements of a run, as (raw value, sequence number, stored), in order.
func results(_ outputs: [SessionOutput]) -> [String] {
    outputs.compactMap { o in
        guard case let .measurement(m) = o else { return nil }
        return "\(Hex.encode(m.raw)) seq \(m.sequenceNumber.map(String.init) ?? "-")"
    }
}

@Suite("A captured cuff served back")
struct CapturedCuffTests {
    /// Every committed capture: a session against the served capture gives the measurements
    /// `cuff replay` reads from it, and ends the same way.
    @Test(arguments: committedCaptures())
    func servedCaptureGivesTheReplaysMeasurements(_ name: String) throws {
        let path = capturesDirectory.appendingPathComponent(name + ".btsnoop").path
        let captured = try CapturedCuff.load(path: path)
        let live = measure(against: CapturedCuffPeripheral(captured))
        let replayed = try replayFile(path).outputs
        #expect(!results(replayed).isEmpty || name == "disconnect", "\(name): the replay has measurements")
        #expect(Set(results(live)) == Set(results(replayed)), "\(name)")
        func outcome(_ o: [SessionOutput]) -> SessionOutcome? {
            o.compactMap { if case let .session(s) = $0, s.event == .end { s.outcome } else { nil } }.last
        }
        #expect(outcome(live) == outcome(replayed), "\(name)")
    }

    /// A cuff cuff did not make: another layout (Device Information first, a battery service, gaps
    /// between handles, a user description before the CCCD, a group to 0xFFFF), BPS 1.1 values.
    static func foreignCuff() throws -> CapturedCuff {
        var b = AttributeDatabase.Builder()
        b.skip(to: 0x0001)
        b.addService(.genericAccess)
        b.addCharacteristic(
            .deviceName, properties: .read, permissions: .read, value: Array("BM-Foreign".utf8),
            declarationHandle: 0x0002, descriptors: [])
        b.endService(at: 0x0005)
        b.skip(to: 0x0010)
        b.addService(BluetoothUUID(0x180A))
        b.addCharacteristic(
            BluetoothUUID(0x2A29), properties: .read, permissions: .read, value: Array("Other Maker".utf8),
            declarationHandle: 0x0011, descriptors: [])
        b.addCharacteristic(
            BluetoothUUID(0x2A25), properties: .read, permissions: .read, value: Array("FX-77".utf8),
            declarationHandle: 0x0013, descriptors: [])
        b.skip(to: 0x0030)
        b.addService(BluetoothUUID(0x180F))
        b.addCharacteristic(
            BluetoothUUID(0x2A19), properties: [.read, .notify], permissions: .read, value: [88],
            declarationHandle: 0x0031,
            descriptors: [(0x0033, .clientCharacteristicConfiguration, [])])
        b.skip(to: 0x0040)
        b.addService(BluetoothUUID(0x1810))
        b.addCharacteristic(
            BluetoothUUID(0x2B35), properties: .notify, permissions: [], declarationHandle: 0x0041,
            descriptors: [
                (0x0043, BluetoothUUID(0x2901), Array("cuff pressure".utf8)),
                (0x0044, .clientCharacteristicConfiguration, []),
            ])
        b.addCharacteristic(
            BluetoothUUID(0x2B34), properties: .indicate, permissions: [], declarationHandle: 0x0046,
            descriptors: [(0x0048, .clientCharacteristicConfiguration, [])])
        b.addCharacteristic(
            BluetoothUUID(0x2A49), properties: .read, permissions: .read, value: [0x21, 0x00],
            declarationHandle: 0x004A, descriptors: [])
        b.endService(at: 0xFFFF)
        let db = b.build()
        // Cuff pressure rising and falling, then the result (2B34: 128/84/99 mmHg, pulse 70).
        var pushes: [CapturedCuff.Push] = []
        for (i, p) in [20, 80, 150, 160, 140, 110, 90].enumerated() {
            let v = EnhancedBloodPressureMeasurement(kind: .cuffPressure(SFloat(Double(p)))).encode()
            pushes.append(
                .init(
                    handle: 0x0042, value: v, indication: false, gap: i == 0 ? .milliseconds(300) : .milliseconds(200),
                    requires: [0x0044, 0x0048]))
        }
        let result = EnhancedBloodPressureMeasurement(
            kind: .measurement(systolic: SFloat(128), diastolic: SFloat(84), meanArterialPressure: SFloat(99)),
            pulseRate: SFloat(70)
        ).encode()
        pushes.append(
            .init(handle: 0x0047, value: result, indication: true, gap: .milliseconds(400), requires: [0x0044, 0x0048]))
        return CapturedCuff(
            connection: .init(
                number: 1, adapter: 0, handle: 0x0041, peer: nil, services: 4, hasBloodPressureService: true,
                pushes: pushes.count,
                servable: true, inheritedDiscovery: false),
            database: db, pushes: pushes, dropAfter: nil, unknownValues: [], name: "BM-Foreign")
    }

    /// A capture of a session with the foreign cuff, as `cuff measure --capture` records one.
    static func foreignCapture() throws -> String {
        let path = temporaryPath("foreign-\(UUID().uuidString).btsnoop")
        var rec = SessionRecorder(
            datalink: .monitor, adapter: 0, localAddress: BDAddress("00:AA:01:01:00:01")!, connectionHandle: 0x0041)
        var writer = try BTSnoopWriter(path: path, datalink: .monitor)
        var p = CapturedCuffPeripheral(try foreignCuff())
        var c = CuffCentral(configuration: CuffSessionConfiguration(address: "foreign"))
        var now = Timestamp(nanoseconds: 1_790_000_000_000_000_000)
        func at() -> EventTime { EventTime(monotonic: now, wallMicros: now.nanoseconds / 1000) }
        try writer.write(
            contentsOf: rec.connected(peer: BDAddress("C4:7C:8D:6A:11:22")!, peerType: .public, role: .central, at: now)
        )
        var toP: [[UInt8]] = [], toC: [[UInt8]] = []
        func central(_ o: [CuffCentral.Output]) { for case let .send(pdu) in o { toP.append(pdu) } }
        func peripheral(_ o: [PeripheralOutput]) { for case let .send(pdu) in o { toC.append(pdu) } }
        peripheral(p.connected(now: now, client: nil))
        central(c.start(at: at()))
        var steps = 0
        while !c.isFinished, steps < 100_000 {
            steps += 1
            if !toP.isEmpty {
                let pdu = toP.removeFirst()
                try writer.write(contentsOf: rec.att(pdu, direction: .fromLocal, at: now))
                peripheral(p.receive(pdu, now: now))
            } else if !toC.isEmpty {
                let pdu = toC.removeFirst()
                try writer.write(contentsOf: rec.att(pdu, direction: .toLocal, at: now))
                central(c.receive(pdu, at: at()))
            } else if let next = [c.nextDeadline, p.nextDeadline].compactMap({ $0 }).min() {
                now = max(now, next) + .milliseconds(1)
                peripheral(p.tick(now: now))
                central(c.tick(at: at()))
            } else {
                break
            }
            now = now + .milliseconds(2)
        }
        try writer.write(contentsOf: rec.disconnected(reason: 0x16, at: now))
        _ = try writer.finish()
        return path
    }

    /// A capture whose pushes all carry one time (no gap between them), served with `--loop`:
    /// each call returns, a round of pushes takes at least `shortestRound`, and the rounds go on.
    @Test func aLoopOfPushesWithoutGapsIsPacedAndEachCallReturns() throws {
        var captured = try Self.foreignCuff()
        for i in captured.pushes.indices { captured.pushes[i].gap = .zero }
        var p = CapturedCuffPeripheral(captured, loop: true)
        var now = Timestamp(nanoseconds: 5_000_000_000)
        _ = p.connected(now: now, client: nil)
        func pushes(_ o: [PeripheralOutput]) -> Int {
            o.count { if case let .send(pdu) = $0 { pdu.first == 0x1B || pdu.first == 0x1D } else { false } }
        }
        var sent = 0
        for cccd: UInt16 in [0x0044, 0x0048] {
            sent += pushes(p.receive([0x12, UInt8(cccd & 0xFF), UInt8(cccd >> 8), 0x03, 0x00], now: now))
        }
        sent += pushes(p.tick(now: now))
        // One round (7 notifications and the indication), not a round after round without end.
        #expect(sent == captured.pushes.count)
        #expect(p.nextDeadline.map { $0 >= now + CapturedCuffPeripheral.shortestRound } == true, "\(p.nextDeadline!)")
        // Confirm the indication; the next round comes a round's time later, not before.
        _ = p.receive([0x1E], now: now)
        #expect(pushes(p.tick(now: now + .milliseconds(999))) == 0)
        now = now + CapturedCuffPeripheral.shortestRound
        #expect(pushes(p.tick(now: now)) == captured.pushes.count)
    }

    /// A captured value longer than this client's ATT_MTU allows goes out cut (as ATT does), and
    /// the log says so once a connection, naming the handle and the MTU (probe H: it was silent).
    @Test func aValueCutToTheClientsMTUIsSaid() throws {
        var captured = try Self.foreignCuff()
        let i = try #require(captured.pushes.firstIndex { !$0.indication })
        captured.pushes[i].value += [UInt8](repeating: 0x11, count: 30)
        for j in captured.pushes.indices { captured.pushes[j].gap = .zero }
        var p = CapturedCuffPeripheral(captured)
        let now = Timestamp(nanoseconds: 5_000_000_000)
        var out = p.connected(now: now, client: nil)
        for cccd: UInt16 in [0x0044, 0x0048] {
            out += p.receive([0x12, UInt8(cccd & 0xFF), UInt8(cccd >> 8), 0x03, 0x00], now: now)
        }
        out += p.tick(now: now)
        _ = p.receive([0x1E], now: now)
        out += p.tick(now: now + .seconds(5))
        let logs = out.compactMap { if case let .log(s) = $0 { s } else { nil } }.filter { $0.contains("goes out cut") }
        #expect(logs.count == 1, "\(out)")
        #expect(
            logs.first?.contains(
                "\(captured.pushes[i].value.count) bytes on \(Hex.handle(captured.pushes[i].handle)) goes out cut to 20: this client's ATT_MTU is 23"
            ) == true, "\(logs)")
        let sentLong = out.contains { if case let .send(pdu) = $0 { pdu.count > 23 } else { false } }
        #expect(!sentLong)
    }

    @Test func aForeignLayoutIsServedHandleForHandle() throws {
        let path = try Self.foreignCapture()
        defer { unlink(path) }
        let replayed = try replayFile(path).outputs
        #expect(results(replayed).count == 1, "the replay reads the foreign cuff's result")
        let captured = try CapturedCuff.load(path: path)
        let original = try Self.foreignCuff()
        // The served table is the foreign cuff's, handle for handle (values the client read included).
        #expect(captured.database.attributes.map(\.handle) == original.database.attributes.map(\.handle))
        #expect(captured.database.attributes.map(\.type) == original.database.attributes.map(\.type))
        #expect(captured.database.services.map(\.endHandle) == original.database.services.map(\.endHandle))
        #expect(
            captured.database.characteristics.map(\.cccdHandle) == original.database.characteristics.map(\.cccdHandle))
        #expect(captured.database.attribute(0x0012)?.value == Array("Other Maker".utf8))
        #expect(captured.name == "BM-Foreign")
        #expect(captured.pushes.count == original.pushes.count)
        let live = measure(against: CapturedCuffPeripheral(captured))
        #expect(results(live) == results(replayed))
        // The same from the capture converted to pcap and pcapng (when Wireshark's editcap is here).
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/editcap") else {
            print("skipped the pcap/pcapng conversions: /usr/bin/editcap (wireshark-common) is not installed")
            return
        }
        for format in ["pcap", "pcapng"] {
            let out = temporaryPath("foreign-\(UUID().uuidString).\(format)")
            defer { unlink(out) }
            let r = try #require(runTool("/usr/bin/editcap", ["-F", format, path, out]))
            #expect(r.status == 0, "\(r.output)")
            let c = try CapturedCuff.load(path: out)
            #expect(c.database == captured.database, "\(format)")
            #expect(results(measure(against: CapturedCuffPeripheral(c))) == results(replayed), "\(format)")
        }
    }

    /// A peripheral cuff did not make: the shared VM recipe's GATT server (a BlueZ/btvirt capture
    /// of both controllers), whose central used fixed handles (no discovery): with --handle, each
    /// of its sessions served gives the measurement the replay reads for it.
    @Test(.enabled(if: RealCaptureTests.available)) func aForeignPeripheralWithoutDiscoveryServedThroughHandleMaps()
        throws
    {
        let overrides: [UInt16: CuffCharacteristic] = [0x0003: .bloodPressureMeasurement]
        let (sessions, fault) = try CapturedCuff.connections(path: sharedSample, overrides: overrides)
        #expect(fault == nil)
        #expect(sessions.count == 12 && sessions.allSatisfy(\.servable))
        // without the map: nothing to serve
        #expect(throws: (any Error).self) { try CapturedCuff.load(path: sharedSample) }
        var served: [String] = []
        for c in sessions where c.adapter == 1 {
            let captured = try CapturedCuff.load(path: sharedSample, session: c.number, overrides: overrides)
            #expect(captured.database.characteristic(valueHandle: 0x0003)?.cccdHandle == 0x0004)
            served += results(measure(against: CapturedCuffPeripheral(captured)))
        }
        var reader = try CaptureReader(path: sharedSample)
        let replayed = results(replay(try reader.readAll(), adapter: 1, overrides: overrides).outputs)
        #expect(replayed.count == 6)
        #expect(served.sorted() == replayed.sorted())
    }

    @Test func aCaptureWithNothingToServeIsAClearError() throws {
        // The ATT session of WriterTests: a discovery with no Blood Pressure Service.
        let path = temporaryPath("no-bps-\(UUID().uuidString).btsnoop")
        defer { unlink(path) }
        var writer = try BTSnoopWriter(path: path, datalink: .monitor)
        var rec = SessionRecorder(datalink: .monitor, adapter: 0, localAddress: .zero, connectionHandle: 0x0040)
        let t = Timestamp(nanoseconds: 1_790_000_000_000_000_000)
        try writer.write(contentsOf: rec.connected(peer: BDAddress("C0:11:22:33:44:55")!, role: .central, at: t))
        try writer.write(
            contentsOf: rec.att(try #require(Hex.decode("10 0100 ffff 0028")), direction: .fromLocal, at: t))
        try writer.write(
            contentsOf: rec.att(try #require(Hex.decode("11 06 0100 0500 0018")), direction: .toLocal, at: t))
        _ = try writer.finish()
        #expect { try CapturedCuff.load(path: path) } throws: {
            "\($0)".contains("no connection in the capture shows a Blood Pressure Service")
        }
        #expect { try CapturedCuff.load(path: path, session: 4) } throws: { "\($0)".contains("there is no session 4") }
        let list = try CapturedCuff.connections(path: path).connections
        #expect(list.count == 1 && !list[0].servable && list[0].services == 1)
    }

    /// A capture cut short lists the connections before the cut, and names the cut (probe Q: it
    /// listed nothing, and named the error by its Swift type).
    @Test func aCutCaptureListsTheConnectionsBeforeTheCut() throws {
        let bytes = [UInt8](try Data(contentsOf: capturesDirectory.appendingPathComponent("normal.btsnoop")))
        let path = temporaryPath("cut-list-\(UUID().uuidString).btsnoop")
        FileManager.default.createFile(atPath: path, contents: Data(bytes.prefix(9000)))
        defer { unlink(path) }
        let (list, fault) = try CapturedCuff.connections(path: path)
        #expect(fault?.code == .truncatedRecord)
        #expect(list.count == 1 && list[0].servable, "\(list)")
        let whole = try CapturedCuff.connections(path: capturesDirectory.appendingPathComponent("normal.btsnoop").path)
        #expect(whole.fault == nil && whole.connections.count == 1)
    }

    @Test func everyTruncatedCaptureIsAnErrorOrServesWhatItHolds() throws {
        let bytes = [UInt8](try Data(contentsOf: capturesDirectory.appendingPathComponent("normal.btsnoop")))
        // Cut at many points (every 97th byte): no trap, no hang; what loads serves.
        for n in stride(from: 0, to: bytes.count, by: 97) {
            let path = temporaryPath("cut-\(n).btsnoop")
            FileManager.default.createFile(atPath: path, contents: Data(bytes.prefix(n)))
            defer { unlink(path) }
            if let c = try? CapturedCuff.load(path: path) {
                _ = measure(against: CapturedCuffPeripheral(c))
            }
        }
    }
}

/// Issue 28 item 6: a central that never discovered descriptors (it wrote the CCCD at the value
/// handle + 1, as GATT-cached clients do) still leaves a capture that serves: the CCCD its write
/// proves is served, and said so.
@Suite("A captured cuff whose central never discovered descriptors")
struct InferredDescriptorTests {
    static func capture() throws -> String {
        let path = temporaryPath("no-descriptors-\(UUID().uuidString).btsnoop")
        var writer = try BTSnoopWriter(path: path, datalink: .monitor)
        var rec = SessionRecorder(datalink: .monitor, adapter: 0, localAddress: .zero, connectionHandle: 0x0040)
        var t = Timestamp(nanoseconds: 1_790_000_000_000_000_000)
        try writer.write(contentsOf: rec.connected(peer: BDAddress("00:AA:01:00:00:07")!, role: .central, at: t))
        // Services and characteristics discovered; no Find Information.
        let conversation: [(String, ATTDirection)] = [
            ("10 0100 ffff 0028", .fromLocal), ("11 06 0a00 1200 1018", .toLocal),
            ("08 0a00 1200 0328", .fromLocal), ("09 07 0b00 20 0c00 352a 0e00 02 0f00 492a", .toLocal),
            ("12 0d00 0200", .fromLocal), ("13", .toLocal),
            ("1d 0c00 02 7800 5000 5d00 ea07 0b 19 0a 00 00", .toLocal), ("1e", .fromLocal),
        ]
        for (hex, direction) in conversation {
            t = t + .milliseconds(30)
            try writer.write(contentsOf: rec.att(try #require(Hex.decode(hex)), direction: direction, at: t))
        }
        try writer.write(contentsOf: rec.disconnected(reason: 0x16, at: t + .milliseconds(30)))
        _ = try writer.finish()
        return path
    }

    @Test func theWrittenCCCDIsServedAndAClientGetsTheReading() throws {
        let path = try Self.capture()
        defer { unlink(path) }
        let replayed = try replayFile(path).outputs
        #expect(results(replayed).count == 1)
        let captured = try CapturedCuff.load(path: path)
        #expect(captured.database.characteristic(valueHandle: 0x000C)?.cccdHandle == 0x000D)
        #expect(captured.inferredDescriptors == [.init(handle: 0x000D, valueHandle: 0x000C, written: true)])
        // Said when a client connects (cuff simulate's stderr).
        var p = CapturedCuffPeripheral(captured)
        let said = p.connected(now: .zero, client: nil).compactMap { o -> String? in
            if case .log(let s) = o { s } else { nil }
        }
        #expect(
            said.contains {
                $0.contains("served a CCCD at 0x000D for 0x000C") && $0.contains("without discovering descriptors")
            }, "\(said)")
        let live = measure(against: CapturedCuffPeripheral(captured))
        #expect(results(live) == results(replayed), "\(live)")
    }

    /// A bonded cuff that kept its subscription indicates before the central's discovery: the
    /// live central holds the indication until the handles are known, and so does the replay
    /// (probe O: the replay listed it as unmapped and lost the reading the live session printed).
    @Test func anIndicationBeforeDiscoveryIsReadOnceTheHandlesAreKnown() throws {
        let path = temporaryPath("early-indication-\(UUID().uuidString).btsnoop")
        defer { unlink(path) }
        var writer = try BTSnoopWriter(path: path, datalink: .monitor)
        var rec = SessionRecorder(datalink: .monitor, adapter: 0, localAddress: .zero, connectionHandle: 0x0040)
        var t = Timestamp(nanoseconds: 1_790_000_000_000_000_000)
        try writer.write(contentsOf: rec.connected(peer: BDAddress("00:AA:01:00:00:08")!, role: .central, at: t))
        let conversation: [(String, ATTDirection)] = [
            ("1d 0c00 02 7800 5000 5d00 ea07 0b 19 0a 00 00", .toLocal),
            ("10 0100 ffff 0028", .fromLocal), ("11 06 0a00 1200 1018", .toLocal),
            ("08 0a00 1200 0328", .fromLocal), ("09 07 0b00 20 0c00 352a 0e00 02 0f00 492a", .toLocal),
            ("1e", .fromLocal), ("12 0d00 0200", .fromLocal), ("13", .toLocal),
        ]
        for (hex, direction) in conversation {
            t = t + .milliseconds(30)
            try writer.write(contentsOf: rec.att(try #require(Hex.decode(hex)), direction: direction, at: t))
        }
        try writer.write(contentsOf: rec.disconnected(reason: 0x13, at: t + .milliseconds(30)))
        _ = try writer.finish()
        let replay = try replayFile(path)
        #expect(results(replay.outputs) == ["02780050005d00ea070b190a0000 seq -"])
    }

    @Test func placementFollowsTheWriteElseTheValue() {
        let indicate: CharacteristicProperties = .indicate
        #expect(
            CapturedCuff.inferredCCCD(0x0C, properties: indicate, upper: 0x10, writes: [0x0E: [0x02, 0x00]])
                == .init(handle: 0x0E, valueHandle: 0x0C, written: true))
        // Not a subscription value, or outside the characteristic: placed after the value.
        #expect(
            CapturedCuff.inferredCCCD(
                0x0C, properties: indicate, upper: 0x10, writes: [0x0D: [0x07, 0x00], 0x10: [0x02, 0x00]])
                == .init(handle: 0x0D, valueHandle: 0x0C, written: false))
        // No room, or nothing to subscribe to: none.
        #expect(CapturedCuff.inferredCCCD(0x0C, properties: indicate, upper: 0x0D, writes: [:]) == nil)
        #expect(CapturedCuff.inferredCCCD(0x0C, properties: .read, upper: 0x10, writes: [0x0D: [0x02, 0x00]]) == nil)
    }
}
