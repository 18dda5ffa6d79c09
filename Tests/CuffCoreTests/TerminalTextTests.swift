import CuffCore
import Testing

@Suite struct TerminalTextTests {
    @Test func everyControlCharacterIsEscapedAndNothingElse() {
        for v in UInt32(0)...0x2FF {
            let scalar = Unicode.Scalar(v)!
            let out = TerminalText.escapingControlCharacters("a\(Character(scalar))b")
            let control = v < 0x20 || (0x7F...0x9F).contains(v)
            if control {
                #expect(!out.unicodeScalars.contains(scalar), "U+\(String(v, radix: 16)) left as it is")
                #expect(out.hasPrefix("a\\") && out.hasSuffix("b"))
            } else {
                #expect(out == "a\(Character(scalar))b")
            }
        }
    }

    @Test func escapesAreReadable() {
        #expect(TerminalText.escapingControlCharacters("\u{1B}[31mred\u{07}") == "\\x1B[31mred\\x07")
        #expect(TerminalText.escapingControlCharacters("line\nnext\ttab") == "line\\x0Anext\\x09tab")
        #expect(TerminalText.escapingControlCharacters("\u{9B}\u{7F}") == "\\u{009B}\\x7F")
        #expect(TerminalText.escapingControlCharacters("Blutdruckmessgerät 血圧 \\ok") == "Blutdruckmessgerät 血圧 \\ok")
    }
}

@Suite struct HexDigitsTests {
    @Test func fixedWidthDigitsMatchStringRadixPadded() {
        for v in [UInt16(0), 1, 0xA, 0x2A, 0x2A35, 0xFFFF, 0x0100, 0xBEEF] {
            let plain = String(v, radix: 16, uppercase: true)
            let padded = String(repeating: "0", count: 4 - plain.count) + plain
            #expect(Hex.digits(v, 4) == padded)
            #expect(Hex.digits(v, 4, uppercase: false) == padded.lowercased())
            #expect(Hex.handle(v) == "0x" + padded)
        }
        for v in UInt8.min...UInt8.max {
            let plain = String(v, radix: 16, uppercase: true)
            #expect(Hex.digits(v, 2) == (plain.count == 1 ? "0" + plain : plain))
        }
    }
}
