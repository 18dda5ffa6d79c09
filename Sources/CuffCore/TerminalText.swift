// SPDX-License-Identifier: GPL-2.0-or-later

/// Text bound for a terminal (stderr) with the control characters made visible.
///
/// Messages quote what cuff read: hex a user typed, device names a peripheral advertised, file
/// names, bytes from a capture. Written raw, an ESC or a BEL in them would drive the terminal
/// (colours, cursor moves, the window title). Every C0 control (U+0000–U+001F, newline and tab
/// included: one message is one line), DEL and every C1 control (U+0080–U+009F, which some
/// terminals read as ESC sequences) is written as `\xHH` or `\u{HHHH}`; a backslash itself is
/// left alone. Everything else, any script's letters included, passes as it is.
public enum TerminalText {
    /// `text` with its control characters escaped, or `text` itself when it has none.
    public static func escapingControlCharacters(_ text: String) -> String {
        // Most messages: a scan of the UTF-8 bytes finds none of a control's bytes (C0 and DEL are
        // those bytes; a C1 control is 0xC2 then 0x80–0x9F). A scan of the scalars cost about
        // 3,900 instructions for each line a replay writes to stderr (under callgrind).
        if let clean = text.utf8.withContiguousStorageIfAvailable({ !mayHoldControl($0) }), clean {
            return text
        }
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            guard isControl(scalar) else {
                out.append(scalar)
                continue
            }
            let v = scalar.value
            let digits = v < 0x80 ? 2 : 4
            let hex = String(v, radix: 16, uppercase: true)
            let padded = String(repeating: "0", count: digits - hex.count) + hex
            out.append(contentsOf: (v < 0x80 ? "\\x\(padded)" : "\\u{\(padded)}").unicodeScalars)
        }
        return String(out)
    }

    /// True when `b` holds a byte below 0x20, DEL or 0xC2 (a C1 control's lead byte): 8 bytes at
    /// a time (a byte at a time cost about 1,800 instructions for each notice a short-session
    /// replay writes). A true may be wrong (a 0xC2 of another character): the caller looks again.
    static func mayHoldControl(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let p = b.baseAddress else { return false }
        let raw = UnsafeRawPointer(p), n = b.count
        let highs: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func control(_ c: UInt8) -> Bool { c < 0x20 || c == 0x7F || c == 0xC2 }
        var i = 0
        while i + 8 <= n {
            let w = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            // A word of ASCII bytes (high bits clear) in one test: a byte b < 0x20 is one where
            // b + 0x60 keeps its high bit clear, DEL the one where b + 1 sets it (no sum carries
            // into the next byte while every byte is below 0x80). A word with a byte ≥ 0x80 (or
            // one that matched) is looked at byte by byte.
            if (w | (w &+ 0x0101_0101_0101_0101) | ~(w &+ 0x6060_6060_6060_6060)) & highs != 0 {
                for k in i..<(i + 8) where control(p[k]) { return true }
            }
            i += 8
        }
        while i < n {
            if control(p[i]) { return true }
            i += 1
        }
        return false
    }

    /// `text` in single quotes for a message, cut to its first `limit` bytes of UTF-8 (at a
    /// character boundary) when longer, with its length: `'1e8a00…' (16777216 bytes)`.
    public static func quotedExcerpt(_ text: String, limit: Int = 64) -> String {
        let n = text.utf8.count
        guard n > limit else { return "'\(text)'" }
        return "'\(excerpt(text, limit: limit))' (\(n) bytes)"
    }

    /// `text` cut to its first `limit` bytes of UTF-8 (at a character boundary) with `…` when
    /// longer; `text` itself otherwise. For a value echoed back (a JSON `raw` field).
    public static func excerpt(_ text: String, limit: Int = 64) -> String {
        guard text.utf8.count > limit else { return text }
        var kept = 0
        var cut = text.startIndex
        for c in text {
            let w = c.utf8.count
            if kept + w > limit { break }
            kept += w
            cut = text.index(after: cut)
        }
        return String(text[..<cut]) + "…"
    }

    @inline(__always)
    static func isControl(_ s: Unicode.Scalar) -> Bool {
        s.value < 0x20 || (s.value >= 0x7F && s.value <= 0x9F)
    }
}
