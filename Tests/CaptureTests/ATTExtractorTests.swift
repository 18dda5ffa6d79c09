// SPDX-License-Identifier: GPL-2.0-or-later

import Capture
import CuffCore
import Testing

@Suite struct ATTExtractorTests {
    static func acl(
        _ bytes: [UInt8], _ direction: HCIDirection, adapter: UInt16 = 0, at micros: Int64 = 0, offset: Int64 = 0
    ) -> HCIRecord {
        HCIRecord(
            timestamp: Timestamp(nanoseconds: micros * 1000), adapterIndex: adapter, direction: direction,
            kind: .aclData, payload: bytes, fileOffset: offset)
    }
    static func event(_ bytes: [UInt8], adapter: UInt16 = 0, offset: Int64 = 0) -> HCIRecord {
        HCIRecord(
            timestamp: .zero, adapterIndex: adapter, direction: .received, kind: .event, payload: bytes,
            fileOffset: offset)
    }

    // LE Connection Complete (3e 13 01): status 0, handle 0x002a, role 1 (peripheral), peer type 0,
    // peer 00:AA:01:01:00:01, interval 0x0028, latency 0, timeout 0x002a, accuracy 0 — bytes of the
    // shared sample's first one (file offset 2324).
    static let connectionComplete = hex("3e 13 01 00 2a 00 01 00 01 00 01 01 aa 00 28 00 00 00 2a 00 00")
    // Disconnection Complete: status 0, handle 0x002a, reason 0x13.
    static let disconnectionComplete = hex("05 04 00 2a 00 13")

    @Test func connectionAttAndDisconnection() throws {
        let events = try extract([
            Self.event(Self.connectionComplete, offset: 100),
            Self.acl(hex("2a 20 07 00 03 00 04 00 02 05 02"), .received, at: 5, offset: 200),  // PB 0b10
            Self.acl(hex("2a 00 07 00 03 00 04 00 03 f7 00"), .sent, at: 6, offset: 300),  // PB 0b00
            Self.event(Self.disconnectionComplete, offset: 400),
        ])
        #expect(events.count == 4)
        guard case .connected(let c) = events[0] else { Issue.record("expected connected"); return }
        #expect(c.connectionHandle == 42 && c.role == .peripheral && c.peerAddressType == .public)
        #expect(c.peerAddress.description == "00:AA:01:01:00:01")
        #expect(c.fileOffset == 100)
        #expect(
            events[1].att
                == ATTPacket(
                    adapter: 0, connectionHandle: 42, direction: .toLocal, pdu: hex("02 05 02"),
                    timestamp: Timestamp(nanoseconds: 5000), fileOffset: 200, connectionKnown: true))
        #expect(events[2].att?.direction == .fromLocal)
        #expect(events[2].att?.pdu == hex("03 f7 00"))
        guard case .disconnected(let d) = events[3] else { Issue.record("expected disconnected"); return }
        #expect(d.connectionHandle == 42 && d.reason == 0x13)
    }

    /// btmon's Delete Index (the controller unplugged) ends that controller's links, as a
    /// Disconnection Complete would (probe Q: its session stayed open to the capture's end);
    /// another controller's links stay.
    @Test func deleteIndexEndsThatControllersLinks() throws {
        let gone = HCIRecord(
            timestamp: Timestamp(nanoseconds: 9000), adapterIndex: 0, direction: .received,
            kind: .monitorDeleteIndex, payload: [], fileOffset: 500)
        let events = try extract([
            Self.event(Self.connectionComplete, adapter: 0, offset: 100),
            Self.event(Self.connectionComplete, adapter: 1, offset: 200),
            gone,
            Self.acl(hex("2a 20 07 00 03 00 04 00 02 05 02"), .received, adapter: 1, at: 10, offset: 600),
        ])
        #expect(events.count == 4)
        guard case .disconnected(let d) = events[2] else { Issue.record("expected disconnected: \(events)"); return }
        #expect(d.adapter == 0 && d.connectionHandle == 42 && d.fileOffset == 500)
        #expect(d.timestamp == Timestamp(nanoseconds: 9000))
        #expect(d.cause == "the controller hci0 was removed")
        #expect(events[3].att?.adapter == 1 && events[3].att?.connectionKnown == true)
    }

    @Test func enhancedConnectionCompleteV1AndV2() throws {
        // 3e 1f 0a: status, handle 0x0040, role 0, peer type 1 (random), peer c0:11:22:33:44:55,
        // local RPA, peer RPA, interval, latency, timeout, accuracy. v2 (0x29) adds adv handle + sync handle.
        let v1 =
            hex("3e 1f 0a 00 40 00 00 01 55 44 33 22 11 c0") + [UInt8](repeating: 0, count: 12)
            + hex("18 00 00 00 48 00 00")
        let v2 =
            hex("3e 22 29 00 41 00 01 00 01 02 03 04 05 06") + [UInt8](repeating: 0, count: 12)
            + hex("18 00 00 00 48 00 00 ff ff ff")
        let failed = hex("3e 1f 0a 3e 42 00 00 01 55 44 33 22 11 c0") + [UInt8](repeating: 0, count: 19)  // status 0x3e
        let events = try extract([Self.event(v1), Self.event(v2), Self.event(failed)])
        let conns = events.compactMap { e -> ConnectionInfo? in if case .connected(let c) = e { c } else { nil } }
        #expect(conns.count == 2)
        #expect(conns[0].connectionHandle == 0x40 && conns[0].role == .central && conns[0].peerAddressType == .random)
        #expect(conns[0].peerAddress.description == "C0:11:22:33:44:55")
        #expect(conns[1].connectionHandle == 0x41 && conns[1].role == .peripheral)
        #expect(conns[1].peerAddress.description == "06:05:04:03:02:01")
    }

    @Test func fragmentedFramesInterleavedAcrossHandlesAndDirections() throws {
        // A 30-byte ATT Write Request (0x12) to handle 0x0010, as an L2CAP frame of 34 bytes split 27 + 7.
        let pdu: [UInt8] = [0x12, 0x10, 0x00] + (0..<27).map { UInt8($0) }
        let frame: [UInt8] = [34 - 4, 0, 4, 0] + pdu
        let first = [0x01, 0x00, 27, 0] + frame[0..<27]  // handle 1, PB 00
        let rest = [0x01, 0x10, 7, 0] + frame[27...]  // handle 1, PB 01
        let other = hex("02 20 05 00 01 00 04 00 1e")  // handle 2, complete, received
        let rxFirst = [0x01, 0x20, 27, 0] + frame[0..<27]  // handle 1, received direction, PB 10
        let rxRest = [0x01, 0x10, 7, 0] + frame[27...]
        let events = try extract(
            [
                Self.acl(first, .sent, at: 1, offset: 10),
                Self.acl(rxFirst, .received, at: 2, offset: 20),
                Self.acl(other, .received, at: 3, offset: 30),
                Self.acl(Array(rest), .sent, at: 4, offset: 40),
                Self.acl(Array(rxRest), .received, at: 5, offset: 50),
            ], strict: true)
        let att = events.compactMap(\.att)
        #expect(att.map(\.connectionHandle) == [2, 1, 1])
        #expect(att.map(\.pdu) == [[0x1e], pdu, pdu])
        #expect(att.map(\.direction) == [.toLocal, .fromLocal, .toLocal])
        // Timestamp and offset are the first fragment's.
        #expect(att[1].fileOffset == 10 && att[1].timestamp.nanoseconds == 1000)
        #expect(att[2].fileOffset == 20)
        #expect(att.allSatisfy { !$0.connectionKnown })
    }

    @Test func splitL2CAPHeaderIsReassembled() throws {
        let events = try extract(
            [
                Self.acl(hex("05 20 02 00 03 00"), .received),
                Self.acl(hex("05 10 05 00 04 00 02 17 00"), .received),
            ], strict: true)
        #expect(events.compactMap(\.att).map(\.pdu) == [hex("02 17 00")])
    }

    @Test func nonATTChannelsAreIgnored() throws {
        // SMP Pairing Request on CID 0x0006, LE signalling on 0x0005.
        let events = try extract(
            [
                Self.acl(hex("2a 00 0b 00 07 00 06 00 01 03 00 00 10 00 00"), .sent),
                Self.acl(hex("2a 20 06 00 02 00 05 00 0a 0b"), .received),
            ], strict: true)
        #expect(events.isEmpty)
    }

    @Test func continuationWithoutStartWarnsAndGoesOn() throws {
        let events = try extract([
            Self.acl(hex("2a 10 03 00 aa bb cc"), .received, offset: 77),
            Self.acl(hex("2a 20 05 00 01 00 04 00 1e"), .received),
        ])
        #expect(events.count == 2)
        guard case .warning(let w) = events[0] else { Issue.record("expected a warning"); return }
        #expect(w.code == .aclOutOfOrder)
        #expect(w.offset == 77)
        #expect(events[1].att?.pdu == [0x1e])
    }

    @Test func startWhilePendingDropsThePendingFrame() throws {
        let events = try extract([
            Self.acl(hex("2a 20 05 00 09 00 04 00 12"), .received),  // wants 9 bytes of ATT, has 1
            Self.acl(hex("2a 20 05 00 01 00 04 00 1e"), .received, offset: 9),
        ])
        #expect(events.count == 2)
        #expect(events[0] == .warning(CaptureError(.aclOutOfOrder)))
        if case .warning(let w) = events[0] { #expect(w.offset == 9) }
        #expect(events[1].att?.pdu == [0x1e])
    }

    @Test func lengthMismatchesWarn() throws {
        let events = try extract([
            Self.acl(hex("2a 20 09 00 01 00 04 00 1e"), .received, offset: 100),  // ACL says 9, carries 5
            Self.acl(hex("2a 20 06 00 01 00 04 00 1e ff"), .received, offset: 200),  // L2CAP says 1, frame carries 2
            Self.acl(hex("2a 20 05 00 03 00 04 00 0a"), .received, offset: 300),  // L2CAP 3: start…
            Self.acl(hex("2a 10 04 00 01 00 02 03"), .received, offset: 400),  // …continuation overshoots by 1
            Self.acl(hex("2a 20"), .received, offset: 500),  // no ACL header
        ])
        let offsets = events.compactMap { e -> Int64? in if case .warning(let w) = e { w.offset } else { nil } }
        #expect(offsets == [100, 200, 400, 500])
        let codes = events.map { e -> CaptureError.Code? in if case .warning(let w) = e { w.code } else { nil } }
        let expected: [CaptureError.Code?] = [
            .l2capLengthMismatch, .l2capLengthMismatch, .l2capLengthMismatch, .malformedPacket,
        ]
        #expect(codes == expected)
    }

    @Test func strictModeThrows() {
        var x = ATTExtractor(strict: true)
        #expect(throws: CaptureError(.aclOutOfOrder)) {
            try x.consume(Self.acl(hex("2a 10 01 00 aa"), .received))
        }
    }

    @Test func reassemblyIsBoundedByTheL2CAPLength() throws {
        // Start a frame claiming the maximum 65535 bytes, then keep sending continuations past it.
        var x = ATTExtractor()
        var events = try x.consume(Self.acl(hex("2a 20 04 00 ff ff 04 00"), .received))
        let chunk = [UInt8](repeating: 0x55, count: 1000)
        var warned = false
        for _ in 0..<70 {
            events = try x.consume(Self.acl([0x2a, 0x10, 0xe8, 0x03] + chunk, .received))
            if events.contains(.warning(CaptureError(.l2capLengthMismatch))) { warned = true; break }
        }
        #expect(warned)  // at 66 000 > 65 539 bytes, not later
    }

    @Test func maximalFrameCompletes() throws {
        var x = ATTExtractor(strict: true)
        let pdu = [UInt8](repeating: 0x0b, count: 65535)
        let frame: [UInt8] = [0xff, 0xff, 0x04, 0x00] + pdu
        var events = try x.consume(Self.acl([0x2a, 0x20, 27, 0] + frame[0..<27], .received))
        var at = 27
        while at < frame.count {
            let end = min(at + 1021, frame.count)
            events += try x.consume(
                Self.acl([0x2a, 0x10, UInt8((end - at) & 0xff), UInt8((end - at) >> 8)] + frame[at..<end], .received))
            at = end
        }
        #expect(events.compactMap(\.att).map(\.pdu) == [pdu])
    }

    @Test func disconnectionDropsPendingFragmentsAndReconnectionIsKnown() throws {
        let events = try extract([
            Self.acl(hex("2a 20 05 00 09 00 04 00 12"), .received),  // incomplete, no connection seen
            Self.event(Self.disconnectionComplete),
            Self.acl(hex("2a 10 01 00 00"), .received),  // continuation: nothing pending any more
            Self.event(Self.connectionComplete),
            Self.acl(hex("2a 20 05 00 01 00 04 00 1e"), .received),
        ])
        #expect(events.count == 4)
        #expect(events[1] == .warning(CaptureError(.aclOutOfOrder)))
        #expect(events[3].att?.connectionKnown == true)
    }

    @Test func adaptersAreSeparate() throws {
        let events = try extract([
            Self.event(Self.connectionComplete, adapter: 0),
            Self.acl(hex("2a 20 05 00 01 00 04 00 1e"), .received, adapter: 1),
            Self.acl(hex("2a 20 05 00 01 00 04 00 1e"), .received, adapter: 0),
        ])
        #expect(events.compactMap(\.att).map(\.connectionKnown) == [false, true])
    }

    @Test func trackedLinksAreBounded() throws {
        var x = ATTExtractor()
        // Unknown handles with complete frames leave nothing behind.
        for h in 0..<2000 {
            _ = try x.consume(
                Self.acl(
                    [UInt8(h & 0xff), UInt8(h >> 8 & 0x0f | 0x20), 5, 0, 1, 0, 4, 0, 0x1e], .received,
                    adapter: UInt16(h >> 12)))
        }
        #expect(x.trackedLinkCount == 0)
        // Connection events beyond the cap evict idle links.
        for h in 0..<2000 {
            var ev = Self.connectionComplete
            ev[4] = UInt8(h & 0xff); ev[5] = UInt8(h >> 8)
            _ = try x.consume(Self.event(ev))
        }
        #expect(x.trackedLinkCount == ATTExtractor.maximumTrackedLinks)
        // The newest is still known.
        let events = try x.consume(Self.acl([0xcf, 0x27, 5, 0, 1, 0, 4, 0, 0x1e], .received))  // handle 1999 = 0x7cf
        #expect(events.first?.att?.connectionKnown == true)
    }
}
