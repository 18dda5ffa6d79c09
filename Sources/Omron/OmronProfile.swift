// SPDX-License-Identifier: GPL-2.0-or-later

/// How a host proves itself to the cuff (facts sheet §3).
public enum OmronPairing: String, Sendable, Hashable, CaseIterable {
    /// Classic: a 16-byte key programmed in pairing mode (`02`, `00`+key), `01`+key every session.
    case customKey = "key"
    /// OS bond only; nothing written to the unlock characteristic.
    case bondOnly = "bond"
    /// OS bond plus the `11`+4 bytes token echoed as `91 00`+the same 4 bytes.
    case token
}

/// Byte order of multi-byte index entries.
public enum OmronByteOrder: String, Sendable, Hashable { case big, little }

/// The clock window layouts of §8.1 (names after hass-omron PR#156).
public enum OmronClockLayout: String, Sendable, Hashable, CaseIterable {
    /// 10 bytes: [2..7] year−2000, month, day, hour, minute, second; [8] 0; [9] sum([0..8]).
    case at2
    /// 10 bytes: [2..7] month, year−2000, hour, day, second, minute; [8] ignored; [9] sum([0..7]).
    case at2Swapped = "at2-swapped"
    /// 16 bytes: [8..13] year−2000 … second; [14] sum([0..13]); [15] 0.
    case at8
    /// 16 bytes: [8..13] month, year−2000, hour, day, second, minute; sum at [15], complement at [14].
    case at8Swapped = "at8-swapped"
    /// 16 bytes: [0..5] year−2000 … second; no checksum.
    case at0
}

public struct OmronClockWindow: Sendable, Hashable {
    /// Offset in the settings block.
    public var offset: Int
    public var layout: OmronClockLayout
    public var length: Int { layout == .at2 || layout == .at2Swapped ? 10 : 16 }
    /// Byte 4 of a modern 16-byte window, written as 0x01 by the official app (7376T1 family).
    public var flag: UInt8?
}

/// One user's ring of record slots.
public struct OmronUserArea: Sendable, Hashable {
    public var start: UInt16
    public var records: Int
}

/// Where cursors and unread counters sit in the index region (§7.1).
public struct OmronIndexLayout: Sendable, Hashable {
    /// Bytes of the index region at the start of the settings block.
    public var size: Int
    /// Per user: offset of the cursor, of the unread counter.
    public var cursorOffsets: [Int]
    public var unreadOffsets: [Int]
    /// 2, or 4 (HEM-7155T-MW3's u32 entries).
    public var entryWidth: Int
    public var byteOrder: OmronByteOrder
    /// Bits of the cursor that count slots (0xFF or 0x3FFF).
    public var cursorMask: UInt32
    /// Newest slot = cursor + bias (−1 for all but HEM-6401T/6410T).
    public var bias: Int
    /// Slots HeartGuide looks back from the cursor (0 = not used).
    public var backtrack: Int
    /// Raw cursor value of a user with no records; also "none unread".
    public static let clearValue: UInt32 = 0x8000
}

/// Everything that differs between Omron models (facts sheet §5.1).
public struct OmronProfile: Sendable, Hashable, CustomStringConvertible {
    /// Canonical id, e.g. `HEM-7361T`.
    public var id: String
    public var transport: OmronTransport
    public var pairing: OmronPairing
    /// hass-omron drops the bond after each session ("/s").
    public var dropsBond: Bool
    /// Vendor connection type (WLB1.0, WLS3.0, WLD1.0 …), when the catalog names one.
    public var connectType: String?
    public var layout: OmronRecordLayout
    public var slotSize: Int
    public var users: [OmronUserArea]
    /// Transfer block size of reads.
    public var block: Int
    public var settingsRead: UInt16
    public var settingsWrite: UInt16
    /// The catalog's unread section (the bytes `-n` rewrites), when it names one.
    public var unreadSection: Range<Int>?
    public var index: OmronIndexLayout
    public var clock: OmronClockWindow
    /// Equivalent model ids (hass-omron `equivalent_model_ids`) and other ids that map here.
    public var aliases: [String]
    /// Sales names seen in the sources.
    public var salesNames: [String]
    /// What backs the row: the real-device sources, or "transcribed".
    public var checkedAgainst: String

    public var description: String { id }

    /// Settings write address − read address.
    public var delta: Int { Int(settingsWrite) - Int(settingsRead) }
    /// The bytes of the settings block a session reads: index region and clock window.
    public var settingsLength: Int { max(index.size, clock.offset + clock.length, unreadSection?.upperBound ?? 0) }
    /// The bytes written back to mark records read: the unread section, else the whole index region.
    public var markReadRange: Range<Int> { unreadSection ?? 0..<index.size }
    /// Highest EEPROM address a profile touches (for the simulator's image).
    public var memoryEnd: Int {
        let areas = users.map { Int($0.start) + $0.records * slotSize }.max() ?? 0
        return max(areas, Int(settingsWrite) + settingsLength, Int(settingsRead) + settingsLength)
    }
}
