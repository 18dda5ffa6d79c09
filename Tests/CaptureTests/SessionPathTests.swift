// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffSession
import Foundation
import GATT
import Testing
@testable import Capture

/// The session path's short cuts (#18's speed work) give what the long ways give.
@Suite("Session path")
struct SessionPathTests {
    /// The ATT PDUs of one capture's first connection, with who sent them and when.
    static func pdus(_ name: String) throws -> [ATTPacket] {
        let (records, error) = readAll(
            Array(try Data(contentsOf: capturesDirectory.appendingPathComponent(name + ".btsnoop"))))
        #expect(error == nil)
        let packets = try extract(records).compactMap { e -> ATTPacket? in if case let .att(p) = e { p } else { nil } }
        let first = packets.first!
        return packets.filter { $0.adapter == first.adapter && $0.connectionHandle == first.connectionHandle }
    }

    /// Drives an observer over `pdus` (connect, every PDU, disconnect); returns it and its outputs.
    static func observe(_ pdus: [ATTPacket], mappings: [SessionObserver.Mapping] = []) -> (
        SessionObserver, [ReplayOutput]
    ) {
        var o = SessionObserver(
            configuration: CuffSessionConfiguration(address: "AA:BB:CC:DD:EE:FF"), inherited: nil, mappings: mappings)
        var out: [ReplayOutput] = []
        o.connected(at: SessionObserver.eventTime(pdus[0].timestamp), into: &out)
        for p in pdus {
            o.pdu(p.pdu, fromCentral: p.direction == .fromLocal, at: SessionObserver.eventTime(p.timestamp), into: &out)
        }
        o.disconnected("the capture ends", at: SessionObserver.eventTime(pdus.last!.timestamp), into: &out)
        return (o, out)
    }

    /// A mapping made on one connection is reused by a later one with the same discovery, with
    /// the same outputs as mapping it again; a different discovery makes its own.
    @Test(arguments: ["normal", "stored-records-bps-1.1", "beurer-bm85"])
    func mappingReuseGivesTheSameSession(name: String) throws {
        let pdus = try Self.pdus(name)
        let (first, expected) = Self.observe(pdus)
        let made = try #require(first.madeMapping)
        #expect(expected.count > 5)
        let (second, got) = Self.observe(pdus, mappings: [made])
        #expect(got == expected)
        #expect(second.madeMapping == nil)  // reused, not made again
        // Without the first Find Information answer the discovery differs: not reused.
        guard let i = pdus.firstIndex(where: { $0.pdu.first == 0x05 }) else { return }
        var other = pdus
        other.remove(at: i)
        let (fresh, freshOut) = Self.observe(other)
        let (third, thirdOut) = Self.observe(other, mappings: [made])
        #expect(third.madeMapping != nil)
        #expect(thirdOut == freshOut)
        #expect(fresh.madeMapping != nil)
    }

    /// An event the replay takes as "nothing but the clock" (`ATTExtractor.ignores(event:)`)
    /// changes nothing in the extractor and gives no event; malformed ones are left to it.
    @Test func ignoredEventsChangeNothing() throws {
        var ignored = 0
        for name in committedCaptures() {
            let (records, _) = readAll(
                Array(try Data(contentsOf: capturesDirectory.appendingPathComponent(name + ".btsnoop"))))
            var x = ATTExtractor()
            for r in records {
                if case .event = r.kind, r.payload.withUnsafeBytes({ ATTExtractor.ignores(event: $0) }) {
                    ignored += 1
                    var copy = x
                    #expect(try copy.consume(r).isEmpty, "\(name) at \(r.fileOffset)")
                    #expect(copy.trackedLinkCount == x.trackedLinkCount)
                }
                _ = try x.consume(r)
            }
        }
        #expect(ignored > 100)
        for payload in [
            [], [0x13], [0x13, 0x05, 0x01, 0x01, 0x00], [0x05, 0x04, 0x00, 0x40, 0x00, 0x13], [0x3E, 0x01, 0x01],
        ] as [[UInt8]] {
            #expect(!payload.withUnsafeBytes { ATTExtractor.ignores(event: $0) }, "\(Hex.encode(payload))")
        }
        #expect([0x13, 0x05, 0x01, 0x40, 0x00, 0x01, 0x00].withUnsafeBytes { ATTExtractor.ignores(event: $0) })
    }

    /// The btmon opcodes decode as `MonitorOpcode` names them (the decoder matches literals).
    @Test func monitorOpcodesRoundTrip() {
        typealias M = HCIPacketKind.MonitorOpcode
        let named: [UInt16] = [
            M.newIndex, M.deleteIndex, M.command, M.event, M.aclTX, M.aclRX, M.scoTX, M.scoRX, M.openIndex,
            M.closeIndex, M.indexInfo, M.systemNote, M.userLogging, M.isoTX, M.isoRX,
        ]
        for op in named {
            let (kind, direction) = HCIPacketKind.fromMonitor(opcode: op)
            #expect(kind.monitorOpcode(direction: direction) == op, "\(op)")
        }
        for op: UInt16 in [M.vendorDiag, 14, 15, 16, 17, 20, 0xFFFF] {
            #expect(HCIPacketKind.fromMonitor(opcode: op).0 == .other(op))
        }
    }
}
