// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore

/// One user's cursor and unread counter, raw as stored (§7.1).
public struct OmronIndexEntry: Sendable, Hashable {
    public var cursor: UInt32
    public var unread: UInt32

    public init(cursor: UInt32, unread: UInt32) {
        self.cursor = cursor
        self.unread = unread
    }

    public static let empty = OmronIndexEntry(cursor: OmronIndexLayout.clearValue, unread: OmronIndexLayout.clearValue)
    /// Exactly 0x8000: the user has no records at all.
    public var hasNoRecords: Bool { cursor == OmronIndexLayout.clearValue }
}

extension OmronIndexLayout {
    func readEntry(_ b: ArraySlice<UInt8>, at offset: Int) -> UInt32 {
        let base = b.startIndex + offset
        var v: UInt32 = 0
        for i in 0..<entryWidth {
            let byte = UInt32(b[base + i])
            v |= byteOrder == .little ? byte << (8 * i) : byte << (8 * (entryWidth - 1 - i))
        }
        return v
    }

    func writeEntry(_ v: UInt32, into b: inout [UInt8], at offset: Int) {
        for i in 0..<entryWidth {
            let shift = byteOrder == .little ? 8 * i : 8 * (entryWidth - 1 - i)
            b[offset + i] = UInt8(truncatingIfNeeded: v >> shift)
        }
    }

    /// Every user's entry from the settings block's first bytes.
    public func decode(_ settings: ArraySlice<UInt8>) throws(OmronError) -> [OmronIndexEntry] {
        var out: [OmronIndexEntry] = []
        for u in 0..<cursorOffsets.count {
            for (name, off) in [
                ("cursor of user \(u + 1)", cursorOffsets[u]), ("unread counter of user \(u + 1)", unreadOffsets[u]),
            ]
            where settings.count < off + entryWidth {
                throw .truncated(name, at: off, need: entryWidth, have: max(0, settings.count - off))
            }
            out.append(
                OmronIndexEntry(
                    cursor: readEntry(settings, at: cursorOffsets[u]), unread: readEntry(settings, at: unreadOffsets[u])
                ))
        }
        return out
    }

    /// `settings` with each user's entry put in.
    public func encode(_ entries: [OmronIndexEntry], into settings: inout [UInt8]) {
        for (u, e) in entries.enumerated() where u < cursorOffsets.count {
            writeEntry(e.cursor, into: &settings, at: cursorOffsets[u])
            writeEntry(e.unread, into: &settings, at: unreadOffsets[u])
        }
    }

    /// The slot the next record goes to, or nil when the user has none.
    public func nextSlot(_ e: OmronIndexEntry, records: Int) -> Int? {
        guard !e.hasNoRecords, records > 0 else { return nil }
        return ((Int(e.cursor & cursorMask) + bias + 1) % records + records) % records
    }

    /// Records the cuff says are not yet sent (0x8000 = none).
    public func unreadCount(_ e: OmronIndexEntry, records: Int) -> Int {
        if e.unread == OmronIndexLayout.clearValue || e.hasNoRecords { return 0 }
        return min(records, Int(e.unread & cursorMask))
    }
}

/// The clock window (§8): its time, and a window carrying a new time.
public enum OmronClockCodec {
    /// Positions of year, month, day, hour, minute, second in the window.
    static func positions(_ layout: OmronClockLayout) -> [Int] {
        switch layout {
        case .at2: [2, 3, 4, 5, 6, 7]
        case .at2Swapped: [3, 2, 5, 4, 7, 6]
        case .at8: [8, 9, 10, 11, 12, 13]
        case .at8Swapped: [9, 8, 11, 10, 13, 12]
        case .at0: [0, 1, 2, 3, 4, 5]
        }
    }

    static func sum(_ b: ArraySlice<UInt8>) -> UInt8 { b.reduce(0) { $0 &+ $1 } }

    /// True when the window's checksum holds (as real cuffs store it; at8-swapped also in hass-omron's form).
    public static func checksumOK(_ w: [UInt8], layout: OmronClockLayout) -> Bool {
        switch layout {
        case .at2, .at2Swapped: w.count >= 10 && w[9] == sum(w[0..<8]) &+ (layout == .at2 ? w[8] : 0)
        case .at8: w.count >= 16 && w[14] == sum(w[0..<14])
        case .at8Swapped: w.count >= 16 && (w[15] == sum(w[0..<14]) || w[14] == sum(w[0..<14]))
        case .at0: w.count >= 16
        }
    }

    /// The time in the window; nil when it is not a valid date (a reset clock) or the checksum fails.
    public static func decode(_ w: [UInt8], layout: OmronClockLayout) -> DateTime? {
        guard checksumOK(w, layout: layout) else { return nil }
        let p = positions(layout)
        let year = 2000 + Int(w[p[0]]), month = w[p[1]], day = w[p[2]]
        guard (1...12).contains(month), day >= 1, day <= DateTime.lastDay(ofMonth: month, year: UInt16(year)),
            w[p[3]] <= 23, w[p[4]] <= 59, w[p[5]] <= 59
        else { return nil }
        return DateTime(year: UInt16(year), month: month, day: day, hours: w[p[3]], minutes: w[p[4]], seconds: w[p[5]])
    }

    /// `window` with `t` put in, the flag set where the profile has one, and a fresh checksum.
    public static func encode(_ t: DateTime, into window: [UInt8], clock: OmronClockWindow) -> [UInt8] {
        var w = window
        if w.count < clock.length { w += [UInt8](repeating: 0, count: clock.length - w.count) }
        let p = positions(clock.layout)
        let values = [UInt8(clamping: Int(t.year) - 2000), t.month, t.day, t.hours, t.minutes, t.seconds]
        for (i, v) in values.enumerated() { w[p[i]] = v }
        if let f = clock.flag { w[4] = f }
        switch clock.layout {
        case .at2, .at2Swapped:
            w[8] = 0
            w[9] = sum(w[0..<9])
        case .at8:
            w[14] = sum(w[0..<14])
            w[15] = 0
        case .at8Swapped:
            // As the one real HEM-6232T-E block has it: the sum at [15], its complement at [14].
            let s = sum(w[0..<14])
            w[15] = s
            w[14] = ~s
        case .at0: break
        }
        return w
    }
}

/// Which slots to read for one user.
public struct OmronSlotRun: Sendable, Hashable {
    public var user: Int
    /// First slot, and how many follow it (never past the end of the ring).
    public var slot: Int
    public var count: Int
}

public enum OmronReadPlan {
    /// The runs of slots holding a user's unread records, oldest first (§7.2).
    public static func unread(profile: OmronProfile, user: Int, entry: OmronIndexEntry) -> [OmronSlotRun] {
        let n = profile.users[user].records
        guard let next = profile.index.nextSlot(entry, records: n) else { return [] }
        let unread = profile.index.unreadCount(entry, records: n)
        guard unread > 0 else { return [] }
        if next >= unread { return [OmronSlotRun(user: user, slot: next - unread, count: unread)] }
        return [
            OmronSlotRun(user: user, slot: n + next - unread, count: unread - next),
            OmronSlotRun(user: user, slot: 0, count: next),
        ]
        .filter { $0.count > 0 }
    }

    /// Every slot of a user's ring.
    public static func all(profile: OmronProfile, user: Int) -> [OmronSlotRun] {
        [OmronSlotRun(user: user, slot: 0, count: profile.users[user].records)]
    }

    /// Read commands (address, byte count) covering the runs, each at most one block, whole slots
    /// per read when a slot fits in a block.
    public static func reads(profile: OmronProfile, runs: [OmronSlotRun]) -> [(address: UInt16, count: Int)] {
        var out: [(UInt16, Int)] = []
        let perRead = max(1, profile.block / profile.slotSize) * profile.slotSize
        let step = profile.slotSize <= profile.block ? perRead : profile.block
        for r in runs {
            var addr = Int(profile.users[r.user].start) + r.slot * profile.slotSize
            let end = addr + r.count * profile.slotSize
            while addr < end {
                let n = min(step, end - addr)
                out.append((UInt16(addr), n))
                addr += n
            }
        }
        return out
    }
}
