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

    /// Every control (and a neighbour that is not one) at every place in lines long enough to be
    /// scanned a word at a time, among ASCII, two-byte (0xC2 lead bytes of other characters
    /// included), three- and four-byte characters: escaped exactly where a scalar is a control.
    @Test func controlsAtEveryPlaceOfLongLines() {
        func reference(_ s: String) -> String {
            var out = ""
            for u in s.unicodeScalars {
                let v = u.value
                if v < 0x20 || v == 0x7F {
                    out += "\\x" + Hex.digits(UInt8(v), 2)
                } else if (0x80...0x9F).contains(v) {
                    out += "\\u{" + Hex.digits(UInt16(v), 4) + "}"
                } else {
                    out.unicodeScalars.append(u)
                }
            }
            return out
        }
        let fillers = [
            "abcdefghijklmnopqrstuvwxyz0123456789", "é£¥©±µ¿ÀÿĀ", "血圧計ab~", "a😀b😀c😀d", "\u{7E}\u{A0}\u{C0}x",
        ]
        let probes: [Unicode.Scalar] = [
            "\u{0}", "\u{1}", "\u{1B}", "\u{1F}", " ", "~", "\u{7F}", "\u{80}", "\u{9B}", "\u{9F}", "\u{A0}", "\u{A3}",
            "\u{FF}", "\u{100}",
        ]
        var wrong: [String] = []
        for filler in fillers {
            let base = Array(filler.unicodeScalars)
            for at in 0...base.count {
                for probe in probes {
                    var scalars = String.UnicodeScalarView()
                    scalars.append(contentsOf: base[..<at])
                    scalars.append(probe)
                    scalars.append(contentsOf: base[at...])
                    let line = String(scalars)
                    if TerminalText.escapingControlCharacters(line) != reference(line) { wrong.append(reference(line)) }
                }
            }
        }
        #expect(wrong.isEmpty, "first: \(wrong.prefix(3))")
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
