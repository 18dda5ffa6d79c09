// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import Foundation
import Testing

@testable import Sinks

/// JSON strings on stdout carry no raw control character: C0, DEL and C1 (U+0080–U+009F) are all
/// `\u00XX`, whichever writer made the line (the JSON tree or the NDJSON line buffer).
@Suite struct JSONEscapeTests {
    /// The bytes of a measurement line whose device name is `name`, from both writers.
    static func lines(_ name: String) throws -> (tree: [UInt8], buffer: [UInt8]) {
        var d = Vectors.device
        d.name = name
        let m = try Vectors.bpm(Vectors.mmHgFull, device: d)
        let tree = Array((SessionOutput.measurement(m).json.serialized() + "\n").utf8)
        let buffer = NDJSONLineBuffer()
        buffer.append(.measurement(m))
        return (tree, Array(buffer.bytes))
    }

    /// True when `bytes` hold a C0 control, DEL, or a C1 control's UTF-8 (C2 80…C2 9F).
    static func hasRawControl(_ bytes: ArraySlice<UInt8>) -> Bool {
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let b = bytes[i]
            if b < 0x20 || b == 0x7F { return true }
            if b == 0xC2, i + 1 < bytes.endIndex, (0x80...0x9F).contains(bytes[i + 1]) { return true }
            i += 1
        }
        return false
    }

    @Test func everyControlCharacterIsEscapedAndRoundTrips() throws {
        // Every scalar up to U+02FF, alone and between letters, in a short and a long string (the
        // line buffer scans 8 bytes at a time).
        for v in UInt32(0)...0x2FF {
            let c = String(Character(Unicode.Scalar(v)!))
            for name in [c, "ab" + c + "cd", String(repeating: "x", count: 13) + c + String(repeating: "é", count: 9)] {
                let (tree, buffer) = try Self.lines(name)
                #expect(tree == buffer, "U+\(String(v, radix: 16))")
                #expect(!Self.hasRawControl(tree.dropLast()), "U+\(String(v, radix: 16)) reaches stdout raw")
                let back = try JSONSerialization.jsonObject(with: Data(tree)) as? [String: Any]
                #expect((back?["device"] as? [String: Any])?["name"] as? String == name, "U+\(String(v, radix: 16))")
            }
        }
    }

    @Test func delAndC1AreUnicodeEscapes() throws {
        let (tree, _) = try Self.lines("a\u{7F}b\u{80}c\u{9B}d\u{9F}e\u{A0}f")
        let text = String(decoding: tree, as: UTF8.self)
        #expect(text.contains(#""name":"a\u007fb\u0080c\u009bd\u009fe\#u{A0}f""#), "\(text)")
        var s = ""
        JSONEscape.quote("\u{1B}[31m\u{9B}31m", into: &s)
        #expect(s == #""\u001b[31m\u009b31m""#)
    }
}
