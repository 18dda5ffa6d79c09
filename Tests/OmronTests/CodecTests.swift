import BloodPressure
import CuffCore
import Testing
@testable import Omron

func hex(_ s: String) -> [UInt8] { Hex.decode(s)! }
func dt(_ y: Int, _ mo: Int, _ d: Int, _ h: Int, _ mi: Int, _ s: Int) -> DateTime {
    DateTime(year: UInt16(y), month: UInt8(mo), day: UInt8(d), hours: UInt8(h), minutes: UInt8(mi), seconds: UInt8(s))
}

@Suite("Omron framing and channels")
struct FrameTests {
    /// Host frames from the facts sheet §4.2 (both peers send exactly these bytes).
    @Test func commandFramesMatchTheSheet() {
        #expect(Hex.encode(OmronFrame.start.encode()) == "0800000000100018")
        #expect(Hex.encode(OmronFrame.read(0x0260, count: 0x26).encode()) == "080100026026004d")
        #expect(Hex.encode(OmronFrame.end.encode()) == "080f000000000007")
    }

    /// The HEM-7280T session of omblepy #57, as the cuff sent it on the four RX channels.
    static let startReply = ["18800000001000000094041311020778", "5a00ffff954d00e50000000000000000"]
    static let readReply = [
        "2e8100026026401e802d80008000094d", "ff09865e094dff09865e08c809191212", "2c1b855df835685114e002da00ff0000",
    ]
    static let writeCommand = ["1601c002860e401e802d800080000100", "ff01860100d6"]
    static let writeReply = ["1681c002860e401e802d800080000100", "ff018601005600000000000000000000"]

    func reassemble(_ pieces: [String]) throws -> OmronFrame {
        var r = OmronReassembler(transport: .classic)
        var out: [UInt8]?
        for (i, p) in pieces.enumerated() {
            #expect(out == nil)
            out = try r.receive(channel: i, hex(p))
        }
        return try OmronFrame.decode(try #require(out))
    }

    @Test func realHEM7280TSessionDecodes() throws {
        let start = try reassemble(Self.startReply)
        #expect(start.type == 0x8000 && start.kind == .start && start.isReply)
        #expect(start.data.count == 16 && start.status == 0)

        let read = try reassemble(Self.readReply)
        #expect(read.type == 0x8100 && read.address == 0x0260 && read.size == 0x26 && read.data.count == 0x26)
        // The index region of a HEM-7322T-family cuff: BE cursors 0x401E / 0x802D, both counters 0x8000.
        let p = try OmronCatalog.lookup("HEM-7280T-E")
        #expect(p.id == "HEM-7322T")
        let entries = try p.index.decode(read.data[...])
        #expect(
            entries == [
                OmronIndexEntry(cursor: 0x401E, unread: 0x8000), OmronIndexEntry(cursor: 0x802D, unread: 0x8000),
            ])
        #expect(p.index.nextSlot(entries[0], records: 100) == 0x1E)
        #expect(p.index.unreadCount(entries[0], records: 100) == 0)
        // Its clock window (at2-swapped at +0x14): 2025-09-18 18:27:44, the day before the issue was filed.
        let window = Array(read.data[0x14..<0x1E])
        #expect(OmronClockCodec.decode(window, layout: .at2Swapped) == dt(2025, 9, 18, 18, 27, 44))

        let write = try reassemble(Self.writeCommand)
        #expect(write.type == 0x01C0 && write.address == 0x0286 && write.data.count == 14)
        let echo = try reassemble(Self.writeReply)
        #expect(echo.type == 0x81C0 && echo.data == write.data)
        // And our encoder gives the host's bytes back.
        #expect(Hex.encode(write.encode()) == Self.writeCommand.joined())
        #expect(OmronTransport.classic.split(write.encode()).map { Hex.encode($0.bytes) } == Self.writeCommand)

        var r = OmronReassembler(transport: .classic)
        let end = try OmronFrame.decode(
            try #require(try r.receive(channel: 0, hex("088f0000000000870000000000000000"))))
        #expect(end.kind == .end && end.status == 0)
    }

    @Test func everyTruncatedPrefixIsAnError() throws {
        let frame = hex(Self.readReply.joined()).prefix(0x2E)
        for n in 0..<frame.count {
            #expect(throws: OmronError.self) { try OmronFrame.decode(Array(frame.prefix(n))) }
            do {
                _ = try OmronFrame.decode(Array(frame.prefix(n)))
            } catch {
                #expect(error.code == .truncated)
                #expect(error.offset <= n)
            }
        }
        #expect(try OmronFrame.decode(Array(frame)).data.count == 0x26)
    }

    @Test func badCheckLengthAndOrderAreTypedErrors() throws {
        var b = OmronFrame.end.encode()
        b[7] ^= 1
        #expect(throws: OmronError(.badChecksum, field: "check", offset: 7)) { try OmronFrame.decode(b) }
        #expect(throws: OmronError(.invalidLength, field: "length", offset: 0)) {
            try OmronFrame.decode([0x41] + [UInt8](repeating: 0, count: 70))
        }
        #expect(throws: OmronError(.invalidLength, field: "length", offset: 0)) {
            try OmronFrame.decode([0x07, 0, 0, 0, 0, 0, 0])
        }
        var r = OmronReassembler(transport: .classic)
        #expect(throws: OmronError.self) { try r.receive(channel: 1, hex(Self.readReply[1])) }
        _ = try r.receive(channel: 0, hex(Self.readReply[0]))
        #expect(throws: OmronError(.outOfOrder, field: "RX channel 2", offset: 0)) {
            try r.receive(channel: 2, hex(Self.readReply[2]))
        }
        // Channel 0 again starts over.
        _ = try r.receive(channel: 0, hex(Self.readReply[0]))
        _ = try r.receive(channel: 1, hex(Self.readReply[1]))
        #expect(try r.receive(channel: 2, hex(Self.readReply[2]))?.count == 0x2E)
        // Modern: one notification, shorter than L → truncated.
        var m = OmronReassembler(transport: .modern)
        #expect(throws: OmronError.self) { try m.receive(channel: 0, Array(hex(Self.readReply.joined()).prefix(40))) }
        #expect(try m.receive(channel: 0, hex(Self.readReply.joined()))?.count == 0x2E)
    }

    @Test(arguments: [0, 1, 7, 8, 16, 40, 56])
    func roundTripOverBothTransports(n: Int) throws {
        let f = OmronFrame(type: 0x81C0, address: 0x0ABC, data: (0..<n).map { UInt8($0 * 7 & 0xFF) }, status: 0)
        for t in OmronTransport.allCases {
            var r = OmronReassembler(transport: t)
            var out: [UInt8]?
            for piece in t.split(f.encode()) { out = try r.receive(channel: piece.channel, piece.bytes) }
            #expect(try OmronFrame.decode(try #require(out)) == f)
            #expect(t.split(f.encode()).count == (t == .classic ? (n + 8 + 15) / 16 : 1))
        }
    }
}

@Suite("Omron record layouts")
struct RecordTests {
    /// hass-omron's tests: real HEM-7142T2 slots with the values its log printed.
    @Test func realHEM7142T2Records() throws {
        let a = try OmronRecordCodec.decode(hex("6558541a331ade1800004c00ba00")[...], layout: .le14, slotSize: 14)
        #expect(a.systolic == 126 && a.diastolic == 88 && a.pulse == 84 && a.time == dt(2026, 6, 17, 19, 35, 30))
        #expect(a.sequence == 76 && a.cuffOK == true && a.position == 0)
        let b = try OmronRecordCodec.decode(hex("6457431a7316161c000046001900")[...], layout: .le14, slotSize: 14)
        #expect(b.systolic == 125 && b.diastolic == 87 && b.pulse == 67 && b.time == dt(2026, 5, 19, 19, 48, 22))
        #expect(b.sequence == 70)
    }

    /// omblepy #55: HEM-7144T2 slots (sys/dia/bpm and year confirmed by the reporter); sequence 1, 2, 3.
    @Test func realHEM7144T2Records() throws {
        let rows = [
            "624c5e199621d41a800001004bb4", "50453f19ae61c91a802002" + "00817e", "49473e19ae212a1b800003007e81",
        ]
        let r = try rows.map { try OmronRecordCodec.decode(hex($0)[...], layout: .le14, slotSize: 14) }
        #expect(r.map(\.systolic) == [123, 105, 98])
        #expect(r.map(\.diastolic) == [76, 69, 71])
        #expect(r.map(\.pulse) == [94, 63, 62])
        #expect(r.map(\.sequence) == [1, 2, 3])
        #expect(r.allSatisfy { $0.time.year == 2025 })
        #expect(r[0].time == dt(2025, 8, 12, 22, 43, 20))
    }

    /// hass-omron's test and PR#76: a real HEM-7600T-E slot, 145/91/72 at 2026-06-14 23:45.
    @Test func realHEM7600TRecord() throws {
        let r = try OmronRecordCodec.decode(hex("5b781a4819d71b42000014006996")[...], layout: .be14, slotSize: 14)
        #expect(r.systolic == 145 && r.diastolic == 91 && r.pulse == 72)
        #expect(r.time == dt(2026, 6, 14, 23, 45, 2))
        #expect(r.sequence == nil)
    }

    /// The sheet's worked example, in both byte orders (§6.1, §6.2).
    @Test func workedExampleBothOrders() throws {
        let le = try OmronRecordCodec.decode(hex("6b54421967ac491a800007000000")[...], layout: .le14, slotSize: 14)
        let expected = OmronReading(
            systolic: 132, diastolic: 84, pulse: 66, time: dt(2025, 11, 3, 7, 41, 9), irregularPulse: false,
            bodyMovement: true,
            cuffOK: true, batteryLow: false, position: 0, sequence: 7)
        #expect(le == expected)
        var be = try OmronRecordCodec.decode(hex("546b1942ac671a4900800007 0000")[...], layout: .be14, slotSize: 14)
        be.sequence = 7
        #expect(be == expected)
    }

    /// Each bit of the le14 table, one at a time (§6.1).
    @Test func le14BitTable() throws {
        let base = OmronReading(
            systolic: 120, diastolic: 80, pulse: 60, time: dt(2030, 12, 31, 23, 59, 58), sequence: 9)
        for ihb in [false, true] {
            for mov in [false, true] {
                for cuff in [false, true] {
                    for batt in [false, true] {
                        for pos in UInt8(0)...3 {
                            var r = base
                            r.irregularPulse = ihb; r.bodyMovement = mov; r.cuffOK = cuff; r.batteryLow = batt;
                            r.position = pos
                            let b = OmronRecordCodec.encode(r, layout: .le14, slotSize: 14)
                            let w1 = UInt16(b[4]) | UInt16(b[5]) << 8, w2 = UInt16(b[6]) | UInt16(b[7]) << 8
                            #expect(w1 & 0x1F == 23 && w1 >> 5 & 0x1F == 31 && w1 >> 10 & 0xF == 12)
                            #expect((w1 >> 14 & 1 == 1) == ihb && (w1 >> 15 == 1) == mov)
                            #expect(
                                w2 & 0x3F == 58 && w2 >> 6 & 0x3F == 59 && (w2 >> 12 & 1 == 1) == cuff
                                    && (w2 >> 13 & 1 == 1) == batt)
                            #expect(UInt8(w2 >> 14) == pos)
                            #expect(try OmronRecordCodec.decode(b[...], layout: .le14, slotSize: 14) == r)
                            // be14 is the same record with each word's bytes exchanged.
                            var swapped = b
                            for i in stride(from: 0, to: 14, by: 2) { swapped.swapAt(i, i + 1) }
                            var viaBE = try OmronRecordCodec.decode(swapped[...], layout: .be14, slotSize: 14)
                            viaBE.sequence = 9
                            #expect(viaBE == r)
                        }
                    }
                }
            }
        }
    }

    /// be14 bit numbers from the most significant bit (§6.2), checked on the 112-bit integer.
    @Test func be14BitNumbers() throws {
        let r = OmronReading(
            systolic: 200, diastolic: 101, pulse: 77, time: dt(2041, 7, 19, 13, 42, 27), irregularPulse: true,
            bodyMovement: false, cuffOK: true, batteryLow: false, position: 2)
        let b = OmronRecordCodec.encode(r, layout: .be14, slotSize: 14)
        func bits(_ from: Int, _ to: Int) -> Int {
            var v = 0
            for i in from...to { v = v << 1 | Int(b[i / 8] >> (7 - i % 8) & 1) }
            return v
        }
        #expect(bits(0, 7) == 101 && bits(8, 15) == 175 && bits(16, 23) == 41 && bits(24, 31) == 77)
        #expect(bits(32, 32) == 0 && bits(33, 33) == 1 && bits(34, 37) == 7 && bits(38, 42) == 19 && bits(43, 47) == 13)
        #expect(bits(48, 49) == 2 && bits(50, 50) == 0 && bits(51, 51) == 1 && bits(52, 57) == 42 && bits(58, 63) == 27)
        #expect(try OmronRecordCodec.decode(b[...], layout: .be14, slotSize: 14) == r)
        // be14-y6: bits 16–17 are not the year (omblepy #12).
        var y6 = OmronRecordCodec.encode(r, layout: .be14y6, slotSize: 14)
        y6[2] |= 0xC0
        #expect(try OmronRecordCodec.decode(y6[...], layout: .be14y6, slotSize: 14).time.year == 2041)
        #expect(try OmronRecordCodec.decode(y6[...], layout: .be14, slotSize: 14).time.year == 2041 + 192)
    }

    /// hass-omron's HeartGuide test record: 125/80/70, 2026-06-17 19:35:30, IHB, movement, cuff, sequence 42.
    @Test func heartGuide() throws {
        var raw = [UInt8](repeating: 0, count: 24)
        raw[0] = 100; raw[1] = 80; raw[2] = 70; raw[3] = 26
        raw[4] = 0x33; raw[5] = 0xDA; raw[6] = 0xDE; raw[7] = 0x18; raw[10] = 42
        let r = try OmronRecordCodec.decode(raw[...], layout: .heartguide24, slotSize: 24)
        #expect(r.systolic == 125 && r.diastolic == 80 && r.pulse == 70 && r.time == dt(2026, 6, 17, 19, 35, 30))
        #expect(r.irregularPulse && r.bodyMovement && r.cuffOK == true && r.sequence == 42 && r.batteryLow == nil)
        raw[17] = 5
        #expect(throws: OmronError(.invalidValue, field: "measurement status", offset: 17)) {
            try OmronRecordCodec.decode(raw[...], layout: .heartguide24, slotSize: 24)
        }
    }

    /// HEM-6401 table (§6.3), both slot sizes.
    @Test func hem6401() throws {
        for size in [16, 32] {
            var b = [UInt8](repeating: 0x5A, count: size)
            b[0...8] = [26, 3, 4, 5, 6, 61, 100, 70, 65]
            b[11] = 0b1001
            let r = try OmronRecordCodec.decode(b[...], layout: .hem6401, slotSize: size)
            #expect(r.time == dt(2026, 3, 4, 5, 6, 59) && r.systolic == 125 && r.diastolic == 70 && r.pulse == 65)
            #expect(r.ihbCount == 1 && r.movementCount == 2 && r.irregularPulse && r.bodyMovement && r.cuffOK == nil)
            var e = b
            e[6] = 0xE2
            #expect(throws: OmronError.self) { try OmronRecordCodec.decode(e[...], layout: .hem6401, slotSize: size) }
            let zero = [UInt8](repeating: 0, count: 9) + [UInt8](repeating: 7, count: size - 9)
            #expect(throws: OmronError(.emptyRecord, field: "zero placeholder", offset: 0)) {
                try OmronRecordCodec.decode(zero[...], layout: .hem6401, slotSize: size)
            }
        }
    }

    static let layouts: [(OmronRecordLayout, Int)] = [
        (.le14, 14), (.le14, 16), (.be14, 14), (.be14y6, 14), (.hem6401, 16), (.hem6401, 32), (.heartguide24, 24),
    ]

    @Test(arguments: layouts)
    func emptySlotRulesAndTruncation(layout: OmronRecordLayout, size: Int) throws {
        #expect(throws: OmronError(.emptyRecord, field: "all 0xFF", offset: 0)) {
            try OmronRecordCodec.decode([UInt8](repeating: 0xFF, count: size)[...], layout: layout, slotSize: size)
        }
        if layout == .le14 || layout == .heartguide24 {
            var b = [UInt8](repeating: 0, count: size)
            #expect(throws: OmronError(.emptyRecord, field: "zero placeholder", offset: 0)) {
                try OmronRecordCodec.decode(b[...], layout: layout, slotSize: size)
            }
            b[0] = 0xE2
            #expect(throws: OmronError.self) { try OmronRecordCodec.decode(b[...], layout: layout, slotSize: size) }
        }
        let good = OmronRecordCodec.encode(
            OmronReading(systolic: 118, diastolic: 77, pulse: 61, time: dt(2026, 11, 25, 16, 30, 0), sequence: 3),
            layout: layout,
            slotSize: size)
        _ = try OmronRecordCodec.decode(good[...], layout: layout, slotSize: size)
        for n in 0..<size {
            do {
                _ = try OmronRecordCodec.decode(good.prefix(n), layout: layout, slotSize: size)
                Issue.record("prefix of \(n) bytes decoded")
            } catch {
                #expect(error.code == .truncated && error.offset == n)
            }
        }
        #expect(throws: OmronError.self) {
            try OmronRecordCodec.decode((good + [0])[...], layout: layout, slotSize: size)
        }
    }

    @Test func invalidDatesAndMinutes() throws {
        var b = hex("6b54421967ac491a800007000000")
        b[5] &= 0xC3  // month 0
        #expect(throws: OmronError(.invalidValue, field: "month", offset: 5)) {
            try OmronRecordCodec.decode(b[...], layout: .le14, slotSize: 14)
        }
        // Minute 63: clamped on le14, refused on be14 (§10 #7).
        var m = hex("6b54421967ac491a800007000000")
        m[6] |= 0xC0; m[7] |= 0x0F
        #expect(try OmronRecordCodec.decode(m[...], layout: .le14, slotSize: 14).time.minutes == 59)
        var s = m
        for i in stride(from: 0, to: 14, by: 2) { s.swapAt(i, i + 1) }
        #expect(throws: OmronError(.invalidValue, field: "minute", offset: 7)) {
            try OmronRecordCodec.decode(s[...], layout: .be14, slotSize: 14)
        }
    }
}

@Suite("Omron clocks")
struct ClockTests {
    /// Real clock windows with the time the same hass-omron log printed.
    static let real: [(String, OmronClockLayout, DateTime)] = [
        ("c6a40100000000001a070f113b13fa00", .at8, dt(2026, 7, 15, 17, 59, 19)),  // HEM-7382T1
        ("c8a80000000000001a06120e3509ee00", .at8, dt(2026, 6, 18, 14, 53, 9)),  // HEM-7142T2
        ("a0c0061a120f131437c8", .at2Swapped, dt(2026, 6, 15, 18, 20, 19)),  // HEM-7600T-E
        ("08c8051a100d190ef033", .at2Swapped, dt(2026, 5, 13, 16, 14, 25)),  // HEM-7322T-E
        ("50c0000300000000051a0a0e0806a758", .at8Swapped, dt(2026, 5, 14, 10, 6, 8)),  // HEM-6232T-E
    ]

    @Test(arguments: real)
    func realWindows(w: String, layout: OmronClockLayout, t: DateTime) {
        #expect(OmronClockCodec.decode(hex(w), layout: layout) == t)
        // Our encoder, putting the same time back, gives the cuff's own bytes (hosts write 0 at at2's [8]).
        var expected = hex(w)
        if layout == .at2Swapped { expected[8] = 0; expected[9] = OmronClockCodec.sum(expected[0..<9]) }
        #expect(OmronClockCodec.encode(t, into: hex(w), clock: OmronClockWindow(offset: 0, layout: layout)) == expected)
    }

    @Test func chronologicalReadingsOfSwappedWindowsFail() {
        #expect(OmronClockCodec.decode(hex("a0c0061a120f131437c8"), layout: .at2) == nil)
        #expect(OmronClockCodec.decode(hex("50c0000300000000051a0a0e0806a758"), layout: .at8) == nil)
        var bad = hex("c8a80000000000001a06120e3509ee00")
        bad[14] ^= 1
        #expect(OmronClockCodec.decode(bad, layout: .at8) == nil)
    }

    @Test(arguments: OmronClockLayout.allCases)
    func roundTrip(layout: OmronClockLayout) {
        let clock = OmronClockWindow(offset: 0, layout: layout, flag: layout == .at8 ? 1 : nil)
        let t = dt(2031, 2, 28, 23, 5, 7)
        let w = OmronClockCodec.encode(t, into: [UInt8](repeating: 0x33, count: clock.length), clock: clock)
        #expect(w.count == clock.length)
        #expect(OmronClockCodec.decode(w, layout: layout) == t)
        if layout == .at8 { #expect(w[4] == 1) }
    }
}
