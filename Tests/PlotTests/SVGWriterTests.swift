// SPDX-License-Identifier: GPL-2.0-or-later
import Plot
import Testing

@Suite struct SVGWriterTests {
    @Test(arguments: [
        (1.0, "1"), (0.5, "0.5"), (0.125, "0.13"), (-0.004, "0"), (-0.0, "0"), (1234567.891, "1234567.89"),
        (-12.3, "-12.3"), (100.0, "100"), (0.1 + 0.2, "0.3"), (Double.nan, "0"), (Double.infinity, "0"),
    ])
    func numbersAreFormattedDeterministically(_ v: Double, _ text: String) {
        #expect(SVGNumber.format(v) == text)
    }

    /// Past 9e15 the digits were made through `Int64(_:)`, which trapped from 2^63 on (a plot of
    /// NDJSON with `"systolic":1e19`). They are now exact at any size, with no exponent.
    @Test(arguments: [
        (9e15, "9000000000000000"), (9_223_372_036_854_775_807.0, "9223372036854775808"),
        (1e19, "10000000000000000000"), (-1e19, "-10000000000000000000"),
        (18_446_744_073_709_551_616.0, "18446744073709551616"), (1e22, "10000000000000000000000"),
    ])
    func hugeNumbersAreExactIntegers(_ v: Double, _ text: String) {
        #expect(SVGNumber.format(v) == text)
    }

    @Test func theLargestDoubleHasAllItsDigits() {
        let text = SVGNumber.format(Double.greatestFiniteMagnitude)
        #expect(text.count == 309)
        #expect(
            text.hasPrefix(
                "17976931348623157081452742373170435679807056752584499659891747680315726078002853876058955863276687817154045895351438246423432132688946418276846754670353751698604991057655128207624549009038932894407586850845513394230458323690322294816580855933212334827479782620414472316873817718091929988125040402618412485836"
            ))
        #expect(text.hasSuffix("8"))
    }

    @Test func numberDecimalsCanBeChosen() {
        #expect(SVGNumber.format(15.94, decimals: 1) == "15.9")
        #expect(SVGNumber.format(119.5, decimals: 0) == "120")
        #expect(SVGNumber.format(0.05, decimals: 1) == "0.1")
    }

    @Test func textAndAttributesAreEscaped() {
        #expect(SVGWriter.escape("a<b & c>d", attribute: false) == "a&lt;b &amp; c&gt;d")
        #expect(SVGWriter.escape("say \"hi\" 'x'", attribute: true) == "say &quot;hi&quot; &apos;x&apos;")
        #expect(SVGWriter.escape("say \"hi\"", attribute: false) == "say \"hi\"")
        // Characters XML 1.0 forbids become U+FFFD; tab and newline stay text.
        #expect(SVGWriter.escape("a\u{1B}[31mb\u{0}", attribute: false) == "a\u{FFFD}[31mb\u{FFFD}")
        #expect(SVGWriter.escape("a\tb", attribute: true) == "a&#9;b")
        #expect(SVGWriter.escape("≥180 mmHg – ⚠", attribute: false) == "≥180 mmHg – ⚠")
    }

    @Test func hostileTextRoundTripsThroughAnXMLParser() throws {
        let nasty = "</text><script>alert(1)</script> & \"q\" 'a' \u{7}"
        let doc = SVG.root(
            width: 100, height: 50, title: nasty,
            children: [
                SVG.text(nasty, x: 1, y: 2, classes: "t", extra: [SVGAttribute("data-x", nasty)])
            ])
        let root = try SVGParse.parse(SVGWriter.document(doc))
        let t = try #require(root.having("t").first)
        let expected = "</text><script>alert(1)</script> & \"q\" 'a' \u{FFFD}"
        #expect(t.text == expected)
        #expect(t.attributes["data-x"] == expected)
        #expect(root.all.allSatisfy { $0.name != "script" })
    }

    @Test func documentStructure() throws {
        var g = SVGElement("g", [SVGAttribute("class", "c")])
        g.append(SVG.line(0, 0.333, 10, 20.005, stroke: "#000"))
        let text = SVGWriter.document(SVG.root(width: 960, height: 400.5, title: "t", children: [g]))
        #expect(text.hasPrefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\""))
        #expect(text.contains("viewBox=\"0 0 960 400.5\""))
        #expect(text.contains("<line x1=\"0\" y1=\"0.33\" x2=\"10\" y2=\"20.01\" stroke=\"#000\" stroke-width=\"1\"/>"))
        let root = try SVGParse.parse(text)
        #expect(root.name == "svg")
        #expect(root.attributes["width"] == "960")
    }

    @Test func markersOfEveryShapeAreWellFormed() throws {
        let doc = SVG.root(
            width: 100, height: 100, title: "m",
            children: MarkerShape.allCases.map {
                SVG.marker($0, x: 10, y: 10, fill: "#D55E00", classes: "mk")
            })
        let root = try SVGParse.parse(SVGWriter.document(doc))
        #expect(root.having("mk").count == MarkerShape.allCases.count)
    }
}
