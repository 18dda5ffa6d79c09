// SPDX-License-Identifier: GPL-2.0-or-later

import Capture
import CuffCore
import Testing

/// Quiet points: after a record with no connection that a replay could still have open.
@Suite("Quiet points")
struct QuietPointsTests {
    /// One btsnoop record (monitor datalink 2001: flags = adapter << 16 | opcode).
    static func record(_ opcode: UInt16, adapter: UInt16 = 0, _ payload: [UInt8], included: UInt32? = nil) -> [UInt8] {
        var w = ByteWriter()
        w.writeBigEndian(UInt32(payload.count))
        w.writeBigEndian(included ?? UInt32(payload.count))
        w.writeBigEndian(UInt32(adapter) << 16 | UInt32(opcode))
        w.writeBigEndian(UInt32(0))
        w.writeBigEndian(UInt64(0x00E0_3AB4_4A67_6000))
        w.write(contentsOf: payload)
        return w.bytes
    }

    static func event(_ code: UInt8, _ params: [UInt8], adapter: UInt16 = 0) -> [UInt8] {
        record(3, adapter: adapter, [code, UInt8(params.count)] + params)
    }

    static func connected(_ handle: UInt16, status: UInt8 = 0, sub: UInt8 = 0x01, adapter: UInt16 = 0) -> [UInt8] {
        event(
            0x3E, [sub, status, UInt8(handle & 0xFF), UInt8(handle >> 8), 0, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0, 0],
            adapter: adapter)
    }

    static func disconnected(_ handle: UInt16, status: UInt8 = 0, adapter: UInt16 = 0) -> [UInt8] {
        event(0x05, [status, UInt8(handle & 0xFF), UInt8(handle >> 8), 0x13], adapter: adapter)
    }

    /// An ACL fragment (flags in the handle's top bits) holding an ATT Read Request.
    static func acl(_ handle: UInt16, adapter: UInt16 = 0, received: Bool = false) -> [UInt8] {
        record(
            received ? 5 : 4, adapter: adapter,
            [UInt8(handle & 0xFF), UInt8(handle >> 8 | 0x20), 7, 0, 3, 0, 4, 0, 0x0A, 3, 0])
    }

    /// Steps through `records`; the quiet flag after each.
    static func quietAfterEach(_ records: [[UInt8]]) -> [Bool] {
        var points = QuietPoints(datalink: .monitor)
        return records.map { r in
            r.withUnsafeBytes { raw -> Bool in
                guard case let .record(length, quiet) = points.step(raw) else {
                    Issue.record("not a whole record"); return false
                }
                #expect(length == r.count)
                return quiet
            }
        }
    }

    @Test func connectionsOpenOnEventsAndTrafficAndCloseOnlyOnSuccessfulDisconnection() {
        let steps: [([UInt8], Bool)] = [
            (Self.event(0x0E, [1, 0x03, 0x0C, 0]), true),  // Command Complete: nothing opens
            (Self.connected(0x0040), false),
            (Self.acl(0x0041, received: true), false),  // traffic on a handle no event announced
            (Self.disconnected(0x0040), false),  // 0x0041 is still open
            (Self.disconnected(0x0041, status: 0x0C), false),  // a failed disconnection closes nothing
            (Self.disconnected(0x1041), true),  // the handle's top bits are flags, not part of it
            (Self.connected(0x0042, status: 0x3E), false),  // even a failed connection counts as open
            (Self.disconnected(0x0042), true),
            (Self.connected(0x0043, sub: 0x0A, adapter: 1), false),  // Enhanced, on another controller
            (Self.disconnected(0x0043, adapter: 0), false),  // not the same connection
            (Self.disconnected(0x0043, adapter: 1), true),
            (Self.connected(0x0044, sub: 0x29), false),  // Enhanced v2
            (Self.record(3, [0x05, 4, 0, 0x44]), false),  // a Disconnection Complete cut short: ignored
            (Self.record(3, [0x05, 9, 0, 0x44, 0, 0x13]), false),  // its length says more than it holds
            (Self.disconnected(0x0044), true),
            (Self.record(0, [1, 2, 3]), true),  // New Index and other monitor records
        ]
        #expect(Self.quietAfterEach(steps.map(\.0)) == steps.map(\.1))
    }

    /// A record whose timestamp the reader rejects (zero: before year 0) opens and closes
    /// nothing, but ACL data on a connection already open stays where it is either way.
    @Test func aRecordTheReaderSkipsForItsTimestampChangesNothing() {
        func zeroTime(_ r: [UInt8]) -> [UInt8] { Array(r[0..<16]) + [UInt8](repeating: 0, count: 8) + r[24...] }
        let steps: [([UInt8], Bool)] = [
            (zeroTime(Self.acl(0x0040)), true),  // would open 0x0040: skipped
            (zeroTime(Self.connected(0x0040)), true),
            (Self.acl(0x0040), false),
            (zeroTime(Self.acl(0x0040, received: true)), false),  // already open: still open
            (zeroTime(Self.acl(0x0041)), false),
            (zeroTime(Self.disconnected(0x0040)), false),
            (Self.disconnected(0x0040), true),  // 0x0041 never opened
        ]
        #expect(Self.quietAfterEach(steps.map(\.0)) == steps.map(\.1))
    }

    @Test func partialAndOversizeRecords() {
        var points = QuietPoints(datalink: .monitor)
        let r = Self.connected(0x0040)
        for n in [0, 1, 23, 24, r.count - 1] {
            let step = r.prefix(n).withUnsafeBytes { points.step($0) }
            #expect(step == .need(count: n < 24 ? 24 : r.count))
        }
        let huge = Self.record(3, [], included: UInt32(HCIRecord.maximumPayloadLength + 1))
        #expect(huge.withUnsafeBytes { points.step($0) } == .stop)
        #expect(points.isQuiet)  // nothing was taken in
    }

    @Test func h4AndH1Datalinks() {
        // btsnoop 1002: the H4 type byte first; 1001: flags bit 1 tells events from ACL.
        func step(_ datalink: BTSnoopDatalink, _ flags: UInt32, _ payload: [UInt8], _ points: inout QuietPoints) -> Bool
        {
            var w = ByteWriter()
            for v in [UInt32(payload.count), UInt32(payload.count), flags, 0] { w.writeBigEndian(v) }
            w.writeBigEndian(UInt64(0x00E0_3AB4_4A67_6000))  // 2000-01-01 (a zeroed timestamp is skipped)
            w.write(contentsOf: payload)
            guard case let .record(_, quiet) = w.bytes.withUnsafeBytes({ points.step($0) }) else { return false }
            return quiet
        }
        var h4 = QuietPoints(datalink: .uart)
        #expect(step(.uart, 1, [0x02, 0x40, 0x20, 1, 0, 0], &h4) == false)  // ACL on 0x0040
        #expect(step(.uart, 1, [], &h4) == false)  // an empty record: no type byte, no change
        #expect(step(.uart, 3, [0x04, 0x05, 4, 0, 0x40, 0, 0x13], &h4) == true)
        var h1 = QuietPoints(datalink: .hci)
        // event: LE Connection Complete (short, handle read)
        #expect(step(.hci, 3, [0x3E, 4, 0x01, 0, 0x40, 0], &h1) == false)
        #expect(step(.hci, 3, [0x05, 4, 0, 0x40, 0, 0x13], &h1) == true)
        #expect(step(.hci, 0, [0x41, 0x20, 1, 0, 0], &h1) == false)  // ACL
    }

    @Test func tooManyOpenConnectionsStopsTracking() {
        var points = QuietPoints(datalink: .monitor)
        for h in 0...UInt16(QuietPoints.maximumOpen) {
            _ = Self.acl(h).withUnsafeBytes { points.step($0) }
        }
        for h in 0...UInt16(QuietPoints.maximumOpen) {
            _ = Self.disconnected(h).withUnsafeBytes { points.step($0) }
        }
        #expect(!points.isQuiet)  // never again: what was open is no longer known
    }

    @Test func scanGivesWhatStepGivesRecordByRecord() {
        let records = [
            Self.event(0x0E, [1, 0x03, 0x0C, 0]), Self.connected(0x0040), Self.acl(0x0040),
            Self.disconnected(0x0040), Self.record(0, [1, 2, 3]), Self.acl(0x0041), Self.disconnected(0x0041),
        ]
        var expected: [Int] = []
        var end = 0
        for (r, quiet) in zip(records, Self.quietAfterEach(records)) {
            end += r.count
            if quiet { expected.append(end) }
        }
        let bytes = records.flatMap { $0 }
        // Whole, then with the last record cut (it is left for the next call), then from an offset.
        var points = QuietPoints(datalink: .monitor)
        var seen: [Int] = []
        let whole = bytes.withUnsafeBytes { points.scan($0, from: 0) { seen.append($0) } }
        #expect(whole.end == bytes.count && !whole.stop)
        #expect(seen == expected)
        var cut = QuietPoints(datalink: .monitor)
        seen = []
        let first = bytes.dropLast(3).withUnsafeBytes { cut.scan($0, from: 0) { seen.append($0) } }
        #expect(first.end == bytes.count - records.last!.count && !first.stop)
        let rest = bytes.withUnsafeBytes { cut.scan($0, from: first.end) { seen.append($0) } }
        #expect(rest.end == bytes.count && seen == expected)
        // A header no reader gets past stops the scan at its start.
        let huge = Self.record(3, [], included: UInt32(HCIRecord.maximumPayloadLength + 1))
        var stopped = QuietPoints(datalink: .monitor)
        let s = (records[0] + huge).withUnsafeBytes { stopped.scan($0, from: 0) { _ in } }
        #expect(s.end == records[0].count && s.stop)
    }

    /// Random streams of what a btmon file holds, many connections open at once: ACL data on
    /// open handles (the scan's short path) and on others, its flag bits set or not, too short
    /// to name a handle, on two controllers; connections and disconnections, failed or not;
    /// other records; a record the reader skips for its timestamp. `scan` over the whole stream
    /// and over random pieces of it gives the quiet points `step` gives record by record.
    @Test func scanGivesWhatStepGivesOnRandomStreams() {
        var g = SeededRandom(seed: 0x0051_E7E5)
        var quietPoints = 0
        for _ in 0..<300 {
            var records: [[UInt8]] = []
            for _ in 0..<Int.random(in: 1...60, using: &g) {
                // (Two handles on two controllers, and disconnections as often as traffic: the
                // stream keeps coming back to quiet, so a connection wrongly kept or left shows.)
                let handle = UInt16.random(in: 0x40...0x41, using: &g)
                let adapter = UInt16.random(in: 0...1, using: &g)
                switch Int.random(in: 0..<10, using: &g) {
                case 0: records.append(Self.connected(handle, status: g.next() % 4 == 0 ? 2 : 0, adapter: adapter))
                case 1, 2, 3:
                    records.append(Self.disconnected(handle, status: g.next() % 4 == 0 ? 8 : 0, adapter: adapter))
                case 4: records.append(Self.record(Bool.random(using: &g) ? 4 : 5, adapter: adapter, [0x40]))
                case 5: records.append(Self.record(UInt16.random(in: 0...13, using: &g), adapter: adapter, [1, 2, 3]))
                case 6:
                    var r = Self.acl(handle, adapter: adapter, received: Bool.random(using: &g))
                    for i in 16..<24 { r[i] = 0 }  // year 0: outside what a Timestamp holds
                    records.append(r)
                default:
                    var r = Self.acl(handle, adapter: adapter, received: Bool.random(using: &g))
                    r[25] |= UInt8.random(in: 0...0xF, using: &g) << 4  // flag bits above the handle
                    records.append(r)
                }
            }
            var stepped = QuietPoints(datalink: .monitor)
            var expected: [Int] = []
            var end = 0
            for r in records {
                let step = r.withUnsafeBytes { stepped.step($0) }
                #expect(step == .record(length: r.count, quiet: stepped.isQuiet))
                end += r.count
                if case .record(_, true) = step { expected.append(end) }
            }
            let bytes = records.flatMap { $0 }
            var whole = QuietPoints(datalink: .monitor)
            var seen: [Int] = []
            let w = bytes.withUnsafeBytes { whole.scan($0, from: 0) { seen.append($0) } }
            #expect(w.end == bytes.count && !w.stop && seen == expected)
            #expect(whole.isQuiet == stepped.isQuiet)
            // In pieces: each call sees a prefix of the stream, from where the last one stopped.
            var pieces = QuietPoints(datalink: .monitor)
            seen = []
            var from = 0
            var available = 0
            while from < bytes.count {
                available = Swift.min(bytes.count, available + Int.random(in: 1...64, using: &g))
                let r = bytes[..<available].withUnsafeBytes { pieces.scan($0, from: from) { seen.append($0) } }
                #expect(!r.stop && r.end <= available)
                from = r.end
            }
            #expect(seen == expected)
            quietPoints += expected.count
        }
        #expect(quietPoints > 300)  // (the streams do come back to quiet)
    }
}
