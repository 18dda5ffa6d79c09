// SPDX-License-Identifier: GPL-2.0-or-later

import BloodPressure
import Capture
import CuffCore
import Foundation
import Testing

/// ATT opcodes of service discovery (requests and responses), which a bonded central with a GATT
/// cache does not send when it reconnects.
let discoveryOpcodes: Set<UInt8> = [0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x10, 0x11]

/// captures/normal.btsnoop (a session with discovery), then the same cuff reconnecting an hour
/// later on `adapter` with its connection handle `handle` and no discovery: re-recorded from the
/// first session's ATT PDUs without the discovery ones.
/// `cachedReads`: the reconnect reads nothing either (Read and Read Blob requests and responses
/// left out), as a central whose GATT cache also keeps the values it read once (cuff's does).
func bondedReconnectCapture(adapter: UInt16 = 0, handle: UInt16 = 0x0041, cachedReads: Bool = false) throws -> (
    records: [HCIRecord], bpmHandle: UInt16
) {
    var reader = try CaptureReader(path: capturesDirectory.appendingPathComponent("normal.btsnoop").path)
    let first = try reader.readAll()
    let events = try extract(first)
    guard case let .connected(info)? = events.first(where: { if case .connected = $0 { true } else { false } }) else {
        throw CaptureError(.malformedPacket, "no connection in normal.btsnoop")
    }
    let att = events.compactMap(\.att)
    let bpm = try #require(att.first { $0.pdu.first == 0x1D })
    var rec = SessionRecorder(
        datalink: .monitor, adapter: adapter, localAddress: BDAddress("00:AA:01:01:00:01")!, connectionHandle: handle)
    let shift = Duration.seconds(3600)
    var out = first
    out += rec.connected(
        peer: info.peerAddress, peerType: info.peerAddressType, role: .central, at: info.timestamp + shift)
    for p in att {
        let op = p.pdu[0]
        if discoveryOpcodes.contains(op) || (op == 0x01 && p.pdu.count > 1 && discoveryOpcodes.contains(p.pdu[1])) {
            continue
        }
        if cachedReads && [0x0A, 0x0B, 0x0C, 0x0D].contains(op) { continue }
        out += try rec.att(p.pdu, direction: p.direction, at: p.timestamp + shift)
    }
    out += rec.disconnected(reason: 0x13, at: att.last!.timestamp + shift + .milliseconds(500))
    return (out, UInt16(bpm.pdu[1]) | UInt16(bpm.pdu[2]) << 8)
}

/// The measurement records' values, without when they arrived.
func measurementValues(_ lines: [String]) -> [String] {
    lines.filter { $0.hasPrefix("{\"type\":\"measurement\"") }.map { line in
        line.replacingOccurrences(of: #""received_at":"[^"]*""#, with: "", options: .regularExpression)
    }
}

@Suite("Bonded reconnects")
struct BondedReconnectTests {
    /// A reconnect that uses an earlier connection's handles, but whose cuff sends values on
    /// handles that map does not cover (another table at that address: here normal.btsnoop's BPS
    /// 1.0 cuff, then stored-records-bps-1.1.btsnoop's records without its discovery). Those
    /// values are listed as unmapped, as for a connection with no map (exit status 7), not
    /// dropped in silence (probe L: three stored readings vanished, exit 0).
    @Test func valuesOnHandlesAnInheritedMapDoesNotCoverAreListed() throws {
        var reader = try CaptureReader(path: capturesDirectory.appendingPathComponent("normal.btsnoop").path)
        let first = try reader.readAll()
        var other = try CaptureReader(
            path: capturesDirectory.appendingPathComponent("stored-records-bps-1.1.btsnoop").path)
        let second = try extract(try other.readAll())
        guard
            case let .connected(info)? = try extract(first).first(where: {
                if case .connected = $0 { true } else { false }
            })
        else { throw CaptureError(.malformedPacket, "no connection in normal.btsnoop") }
        var rec = SessionRecorder(
            datalink: .monitor, adapter: 0, localAddress: BDAddress("00:AA:01:01:00:01")!, connectionHandle: 0x0041)
        let shift = Duration.seconds(3600 * 24 * 30)
        var records = first
        let att = second.compactMap(\.att)
        records += rec.connected(
            peer: info.peerAddress, peerType: info.peerAddressType, role: .central, at: att[0].timestamp + shift)
        for p in att {
            let op = p.pdu[0]
            if discoveryOpcodes.contains(op) || (op == 0x01 && p.pdu.count > 1 && discoveryOpcodes.contains(p.pdu[1])) {
                continue
            }
            records += try rec.att(p.pdu, direction: p.direction, at: p.timestamp + shift)
        }
        records += rec.disconnected(reason: 0x13, at: att.last!.timestamp + shift + .milliseconds(500))
        var r = CaptureReplay()
        var out: [CaptureReplay.Output] = []
        for x in records { r.consume(x, into: &out) }
        r.finish(into: &out)
        #expect(r.sessions == 2)
        let listed = try #require(r.unmapped.first, "the reconnect's values on handles its map lacks are listed")
        #expect(listed.connectionHandle == 0x0041)
        #expect(listed.usedEarlierMap)
        #expect(listed.handles.values.contains { $0.indications > 0 }, "\(listed.handles)")
        // What the values look like, for the hint: the records as records and the control point's
        // responses as such, never as classic results (probe L: following a guessed 2a35 for
        // them gave diastolic -122800 kPa).
        let shapes = listed.handles.values.map(\.looksLike)
        #expect(shapes.contains(.bloodPressureRecord), "\(listed.handles)")
        #expect(shapes.contains(.recordAccessControlPoint), "\(listed.handles)")
        #expect(!shapes.contains(.bloodPressureMeasurement), "\(listed.handles)")
        // The connection that discovered for itself has nothing listed.
        #expect(r.unmapped.count == 1)
    }

    /// A central with a GATT cache reads neither the handles nor Device Information again (cuff's
    /// own does so): the reconnect's records still name the device, as the live session's did.
    @Test func aReconnectWithoutReadsUsesTheValuesReadEarlier() throws {
        let (records, _) = try bondedReconnectCapture(cachedReads: true)
        let reads = try extract(records).compactMap(\.att).filter { $0.pdu.first == 0x0A }.count
        let (all, _) = try bondedReconnectCapture()
        #expect(
            try extract(all).compactMap(\.att).filter { $0.pdu.first == 0x0A }.count > reads,
            "the reconnect reads nothing")
        var r = CaptureReplay()
        var out: [CaptureReplay.Output] = []
        for rec in records { r.consume(rec, into: &out) }
        r.finish(into: &out)
        let lines = out.compactMap { o -> String? in if case let .emit(e) = o { e.json.serialized() } else { nil } }
        let values = measurementValues(lines)
        #expect(values.count == 2)
        #expect(values.first == values.last)
        #expect(
            values.last?.contains(#""device":{"address":"00:AA:01:00:00:00","name":"cuff-sim""#) == true,
            "\(values.last ?? "")")
    }

    @Test func aReconnectWithoutDiscoveryUsesTheHandlesDiscoveredEarlier() throws {
        let (records, bpm) = try bondedReconnectCapture()
        var r = CaptureReplay()
        var out: [CaptureReplay.Output] = []
        for rec in records { r.consume(rec, into: &out) }
        r.finish(into: &out)
        let lines = out.compactMap { o -> String? in if case let .emit(e) = o { e.json.serialized() } else { nil } }
        let notices = out.compactMap { o -> String? in if case let .notice(s) = o { s } else { nil } }
        #expect(r.sessions == 2)
        #expect(r.unmapped.isEmpty)
        #expect(r.measurements == 2)
        // Both sessions give the same measurement (device information included: its reads are mapped too).
        let values = measurementValues(lines)
        #expect(values.count == 2)
        #expect(values.first == values.last)
        #expect(notices.count == 1)
        let connectedAt = try #require(records.first { $0.kind == .event && $0.payload.first == 0x3E }).fileOffset
        #expect(
            notices.first
                == "hci0 connection 0x0041 to 00:AA:01:00:00:00: no service discovery on this connection; using the handles discovered on connection 0x0040 (connected at offset \(connectedAt))"
        )
        #expect(r.lacking.isEmpty)

        // --handle on the reconnect alone gives the same values (where it maps them).
        let alone = Array(records.drop { $0.timestamp < records.last!.timestamp + .seconds(-1800) })
        let withHandle = replay(alone, overrides: [bpm: .bloodPressureMeasurement])
        let handled = measurementValues(withHandle.lines)
        #expect(handled.count == 1)
        for key in ["\"systolic\":", "\"diastolic\":", "\"pulse_rate\":", "\"raw\":", "\"timestamp\":"] {
            func field(_ s: String) -> Substring? { s.range(of: key).map { s[$0.lowerBound...].prefix(40) } }
            #expect(field(handled[0]) == field(values[1]), "\(key)")
        }
        // Without the earlier session the reconnect's values are unmapped, and the replay says which peer lacked a map.
        let lone = replay(alone)
        #expect(lone.replay.measurements == 0)
        #expect(lone.replay.lacking == [CaptureReplay.Peer(adapter: 0, address: "00:AA:01:00:00:00")])
        // Started with the maps the earlier stretch learned, it gives what the whole replay gives.
        var seeded = CaptureReplay(learned: r.learned)
        var seededOut: [CaptureReplay.Output] = []
        for rec in alone { seeded.consume(rec, into: &seededOut) }
        seeded.finish(into: &seededOut)
        #expect(seeded.measurements == 1)
        #expect(seededOut.contains(.notice(notices[0])))
        // What depends on the map given at the start: the connections that used it.
        let peer = CaptureReplay.Peer(adapter: 0, address: "00:AA:01:00:00:00")
        #expect(seeded.inheritedPeers == [peer])
        #expect(seeded.inheritedUses.isEmpty, "kept only when asked")
        func seededReplay(_ records: [HCIRecord], _ map: DiscoveredHandles) -> (CaptureReplay, [CaptureReplay.Output]) {
            var r = CaptureReplay(learned: [peer: map])
            r.recordsInheritedUses = true
            var out: [CaptureReplay.Output] = []
            for rec in records { r.consume(rec, into: &out) }
            r.finish(into: &out)
            return (r, out)
        }
        let map = try #require(r.learned[peer])
        let use = CaptureReplay.InheritedUse(peer: peer, connectionHandle: 0x0041)
        #expect(seededReplay(alone, map).0.inheritedUses == [use])
        #expect(CaptureReplay.inheritedNotice(use, from: map) == notices[0])
        // Offered the map, the first connection discovers for itself, and the reconnect uses
        // what that discovered: nothing depends on the map given at the start.
        let (rediscovered, again) = seededReplay(records, map)
        #expect(rediscovered.measurements == 2)
        #expect(rediscovered.inheritedPeers.isEmpty)
        #expect(rediscovered.inheritedUses.isEmpty)
        #expect(again.contains(.notice(notices[0])))
        // A map with the same handles discovered elsewhere gives the same, but for the notice.
        var moved = map
        moved.connectionHandle = 0x0123
        moved.openedAt = 99
        #expect(moved != map)
        #expect(moved.sameHandles(as: map))
        let (_, movedOut) = seededReplay(alone, moved)
        #expect(movedOut.count == seededOut.count)
        for (a, b) in zip(movedOut, seededOut) {
            if case .notice = a { continue }
            #expect(a == b)
        }
        #expect(movedOut.contains(.notice(CaptureReplay.inheritedNotice(use, from: moved))))
        #expect(!movedOut.contains(.notice(notices[0])))

        // --handle still wins: the measurement's handle mapped to cuff pressure gives no
        // measurement from either session.
        #expect(replay(records, overrides: [bpm: .intermediateCuffPressure]).replay.measurements == 0)

        // Only the same controller shares: the reconnect on hci1 has no earlier discovery there.
        let (elsewhere, _) = try bondedReconnectCapture(adapter: 1)
        let other = replay(elsewhere)
        #expect(other.replay.measurements == 1)
        #expect(other.replay.unmapped.map(\.adapter) == [1])
    }

    /// A file with more peers than the replay remembers: the table stops growing at its bound.
    @Test func theHandleMapsKeptAreBounded() throws {
        var r = CaptureReplay()
        var out: [CaptureReplay.Output] = []
        var t = Timestamp(nanoseconds: 1_795_330_917_000_000_000)
        let peers = CaptureReplay.maximumLearnedPeers + 3
        for i in 0..<peers {
            var rec = SessionRecorder(datalink: .monitor, adapter: 0, connectionHandle: 0x0040)
            let peer = BDAddress(littleEndian: [UInt8(i & 0xFF), UInt8(i >> 8), 0x22, 0x33, 0x44, 0xC0])
            var records = rec.connected(peer: peer, role: .central, at: t)
            for (pdu, direction) in sessionPDUs.prefix(4) {  // MTU exchange, primary service discovery
                t = t + .milliseconds(3)
                records += try rec.att(pdu, direction: direction, at: t)
            }
            records += rec.disconnected(at: t + .milliseconds(5))
            for x in records { r.consume(x, into: &out) }
            out.removeAll(keepingCapacity: true)
            t = t + .seconds(1)
        }
        #expect(r.sessions == peers)
        #expect(r.learned.count == CaptureReplay.maximumLearnedPeers)
    }
}
