// SPDX-License-Identifier: GPL-2.0-or-later

/// Hex text ⇄ bytes.
public enum Hex {
    /// The ASCII hex digit of a nibble (`v` < 16), lowercase unless asked.
    @inlinable
    public static func digit(_ v: UInt8, uppercase: Bool = false) -> UInt8 {
        v < 10 ? 0x30 + v : (uppercase ? 0x37 : 0x57) + v
    }

    /// The digits of `value`, `digits` of them (leading zeros kept), uppercase unless asked:
    /// `digits(0x2A35, 4)` → `"2A35"`, `digits(0x0A, 2)` → `"0A"`.
    @inlinable
    public static func digits<T: FixedWidthInteger & UnsignedInteger>(_ value: T, _ digits: Int, uppercase: Bool = true)
        -> String
    {
        String(unsafeUninitializedCapacity: digits) { out in
            for i in 0..<digits {
                out[i] = digit(UInt8(truncatingIfNeeded: value >> T(4 * (digits - 1 - i))) & 0xF, uppercase: uppercase)
            }
            return digits
        }
    }

    /// A 16-bit value as the Bluetooth specs write handles and UUIDs in prose: `0x002A`.
    @inlinable
    public static func handle(_ value: UInt16) -> String { "0x" + digits(value, 4) }

    /// Lowercase hex with no separators: `[0x1e, 0x8a]` → `"1e8a"`.
    /// (Inlinable, so each caller gets a copy specialised for its collection type.)
    @inlinable
    public static func encode<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
        if let s = bytes.withContiguousStorageIfAvailable({ encode(contiguous: $0) }) { return s }
        return Array(bytes).withUnsafeBufferPointer { encode(contiguous: $0) }
    }

    /// `encode` of bytes in memory: the text is written straight into the string's storage.
    @inlinable
    public static func encode(contiguous bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            var i = 0
            for b in bytes {
                out[i] = digit(b >> 4)
                out[i + 1] = digit(b & 0xF)
                i += 2
            }
            return i
        }
    }

    /// Parses hex with spaces, colons, dashes or nothing between bytes; an optional `0x` prefix on
    /// the whole string or on each group. Returns nil for an odd digit count or a non-hex character.
    public static func decode(_ text: String) -> [UInt8]? {
        if case .success(let bytes) = parse(text) { return bytes }
        return nil
    }

    /// Where ``decode(_:)`` fails on `text`: the UTF-8 byte offset of the first character that is
    /// no hex digit, of a separator that splits a byte, or of the last digit of an odd count; nil
    /// when it does not fail.
    public static func problemOffset(_ text: String) -> Int? {
        if case .failure(let at) = parse(text) { return at.offset }
        return nil
    }

    /// A byte offset in hex text where it stops being hex (``problemOffset(_:)``).
    public struct BadHex: Error { public var offset: Int }

    static func parse(_ text: String) -> Result<[UInt8], BadHex> {
        var nibbles: [UInt8] = []
        var lastDigit = 0
        let scalars = Array(text.utf8)
        var i = 0
        while i < scalars.count {
            let c = scalars[i]
            if c == UInt8(ascii: "0"), i + 1 < scalars.count, scalars[i + 1] | 0x20 == UInt8(ascii: "x"),
                i == 0 || isSeparator(scalars[i - 1])
            {
                // A "0x" prefix only counts at the start of a group.
                if nibbles.count % 2 == 0 { i += 2; continue }
            }
            if isSeparator(c) {
                // A separator may not split a byte.
                if nibbles.count % 2 != 0 { return .failure(BadHex(offset: i)) }
                i += 1
                continue
            }
            guard let v = nibble(c) else { return .failure(BadHex(offset: i)) }
            nibbles.append(v)
            lastDigit = i
            i += 1
        }
        guard nibbles.count % 2 == 0 else { return .failure(BadHex(offset: lastDigit)) }
        var out: [UInt8] = []
        out.reserveCapacity(nibbles.count / 2)
        var j = 0
        while j < nibbles.count {
            out.append(nibbles[j] << 4 | nibbles[j + 1])
            j += 2
        }
        return .success(out)
    }

    private static func isSeparator(_ c: UInt8) -> Bool {
        c == UInt8(ascii: " ") || c == UInt8(ascii: ":") || c == UInt8(ascii: "-") || c == UInt8(ascii: "\t")
            || c == UInt8(ascii: ",") || c == UInt8(ascii: "\r")
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
