// SPDX-License-Identifier: GPL-2.0-or-later

/// How cuff writes a string inside JSON: the one place that decides what is escaped, used by the
/// ``JSON`` tree, the NDJSON line writer of the Sinks target and the PostgreSQL batch.
///
/// `"` and `\` become `\"` and `\\`; newline, return and tab `\n`, `\r`, `\t`; every other
/// control character, C0 (U+0000–U+001F), DEL (U+007F) and C1 (U+0080–U+009F), becomes `\u00XX`,
/// so none reaches a terminal raw. Everything else is written as its UTF-8.
public enum JSONEscape {
    /// Whether the scalar `v` is written escaped.
    @inlinable public static func isEscaped(_ v: UInt32) -> Bool {
        v < 0x20 || v == 0x22 || v == 0x5C || (v >= 0x7F && v <= 0x9F)
    }

    /// False when none of the 8 UTF-8 bytes of `w` starts anything escaped: no quote, backslash,
    /// byte below 0x20, DEL, or 0xC2 (the lead byte of U+0080–U+00BF, the C1 controls among them;
    /// so a "true" may be a character that is written as it is). Bytes below 0x20 use "a byte less
    /// than n ≤ 128", the others "a byte equal to zero": (x − 0x01…01) & ~x & 0x80…80 ≠ 0.
    // (Inlinable: the NDJSON writer calls it for every 8 bytes of every string; a call each time
    // cost about 1,800 instructions a short session under callgrind.)
    @inlinable @inline(__always) public static func mayNeedEscape(_ w: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func hasZero(_ x: UInt64) -> Bool { (x &- ones) & ~x & highs != 0 }
        return hasZero(w ^ (ones &* 0x22)) || hasZero(w ^ (ones &* 0x5C)) || hasZero(w ^ (ones &* 0x7F))
            || hasZero(w ^ (ones &* 0xC2)) || (w &- ones &* 0x20) & ~w & highs != 0
    }

    /// ``mayNeedEscape(_:)`` for one byte.
    @inlinable @inline(__always) public static func mayNeedEscape(_ b: UInt8) -> Bool {
        b < 0x20 || b == 0x22 || b == 0x5C || b == 0x7F || b == 0xC2
    }

    /// The most bytes one input byte becomes (a C0 control: `\u00XX`).
    public static let maxGrowth = 6

    /// Writes the UTF-8 text `u` escaped (without the quotes) through `put`: at most
    /// ``maxGrowth`` bytes per byte of `u`.
    @inlinable public static func escape(_ u: UnsafeBufferPointer<UInt8>, _ put: (UInt8) -> Void) {
        @inline(__always) func unicode(_ b: UInt8) {
            put(0x5C); put(0x75); put(0x30); put(0x30)
            put(Hex.digit(b >> 4)); put(Hex.digit(b & 0xF))
        }
        var i = 0
        let n = u.count
        while i < n {
            let b = u[i]
            switch b {
            case 0x22: put(0x5C); put(0x22)
            case 0x5C: put(0x5C); put(0x5C)
            case 0x0A: put(0x5C); put(0x6E)
            case 0x0D: put(0x5C); put(0x72)
            case 0x09: put(0x5C); put(0x74)
            case 0..<0x20, 0x7F: unicode(b)
            case 0xC2 where i + 1 < n && u[i + 1] >= 0x80 && u[i + 1] <= 0x9F:
                // U+0080–U+009F: C2 80 … C2 9F.
                i += 1
                unicode(u[i])
            default: put(b)
            }
            i += 1
        }
    }

    /// `s` as a JSON string, quotes included, appended to `out`.
    public static func quote(_ s: String, into out: inout String) {
        var s = s
        s.withUTF8 { u in
            var clean = true
            for b in u where mayNeedEscape(b) {
                clean = false
                break
            }
            if clean {
                out += "\""
                out += String(decoding: u, as: UTF8.self)
                out += "\""
                return
            }
            var bytes: [UInt8] = [0x22]
            bytes.reserveCapacity(u.count * maxGrowth + 2)
            escape(u) { bytes.append($0) }
            bytes.append(0x22)
            out += String(decoding: bytes, as: UTF8.self)
        }
    }
}
