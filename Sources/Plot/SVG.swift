// SPDX-License-Identifier: GPL-2.0-or-later

/// An SVG document as a tree of elements, written out by ``SVGWriter``.
///
/// Every chart builds one of these; no markup is assembled by hand anywhere else. Attribute values
/// and text are escaped when written, numbers are formatted by ``SVGNumber`` (deterministic, no
/// locale, no exponent), so the same input always gives the same bytes.
public struct SVGElement: Sendable, Hashable {
    public var name: String
    public var attributes: [SVGAttribute]
    public var children: [SVGNode]

    public init(_ name: String, _ attributes: [SVGAttribute] = [], children: [SVGNode] = []) {
        self.name = name
        self.attributes = attributes
        self.children = children
    }

    /// The value of attribute `name`, if set.
    public subscript(attribute name: String) -> String? {
        attributes.last(where: { $0.name == name })?.value
    }

    public mutating func append(_ e: SVGElement) { children.append(.element(e)) }
    public mutating func append(contentsOf es: [SVGElement]) { children.append(contentsOf: es.map(SVGNode.element)) }

    /// This element and every element below it, depth first, document order.
    public var descendants: [SVGElement] {
        var out: [SVGElement] = [self]
        for c in children { if case let .element(e) = c { out += e.descendants } }
        return out
    }

    /// The text directly inside this element (its text nodes, joined).
    public var text: String {
        children.map { if case let .text(t) = $0 { t } else { "" } }.joined()
    }
}

public enum SVGNode: Sendable, Hashable {
    case element(SVGElement)
    case text(String)
}

public struct SVGAttribute: Sendable, Hashable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }

    public init(_ name: String, _ number: Double) {
        self.name = name
        self.value = SVGNumber.format(number)
    }
}

/// Numbers in SVG: at most `decimals` decimals (default 2), trailing zeros dropped, never an
/// exponent, never `-0`, never NaN or infinity (those are a programming error upstream; they are
/// written as 0 and the charts never pass them, as tests check).
public enum SVGNumber {
    /// The decimal digits of a whole, finite, non-negative `a` of any size (no exponent, exact):
    /// its binary significand doubled exponent times, in base-10⁹ limbs.
    static func integerDigits(_ a: Double) -> String {
        guard a.isFinite, a >= 1 else { return "0" }
        let shift = Int(a.exponent) - Double.significandBitCount
        var significand = a.significandBitPattern | (1 << UInt64(Double.significandBitCount))
        if shift < 0 { significand >>= UInt64(-shift) }  // a below 2^52: whole already
        var limbs: [UInt64] = []  // little-endian, base 10⁹
        while significand > 0 {
            limbs.append(significand % 1_000_000_000)
            significand /= 1_000_000_000
        }
        for _ in 0..<max(0, shift) {
            var carry: UInt64 = 0
            for i in limbs.indices {
                let d = limbs[i] * 2 + carry
                limbs[i] = d % 1_000_000_000
                carry = d / 1_000_000_000
            }
            if carry > 0 { limbs.append(carry) }
        }
        var text = String(limbs.last ?? 0)
        for limb in limbs.dropLast().reversed() {
            let digits = String(limb)
            text += String(repeating: "0", count: 9 - digits.count) + digits
        }
        return text
    }

    public static func format(_ v: Double, decimals: Int = 2) -> String {
        guard v.isFinite else { return "0" }
        var scale = 1.0
        for _ in 0..<max(0, min(decimals, 6)) { scale *= 10 }
        let scaled = (abs(v) * scale).rounded()
        guard scaled < 9e15 else { return (v < 0 ? "-" : "") + integerDigits(abs(v).rounded()) }
        let n = Int64(scaled)
        if n == 0 { return "0" }
        let whole = n / Int64(scale)
        var frac = n % Int64(scale)
        var digits = max(0, min(decimals, 6))
        while digits > 0 && frac % 10 == 0 {
            frac /= 10
            digits -= 1
        }
        var s = v < 0 ? "-" : ""
        s += String(whole)
        if digits > 0 {
            let f = String(frac)
            s += "." + String(repeating: "0", count: digits - f.count) + f
        }
        return s
    }
}

/// Writes an ``SVGElement`` tree as UTF-8 XML text.
public enum SVGWriter {
    /// The whole document: an XML declaration, then `root` (which should be an `svg` element).
    public static func document(_ root: SVGElement) -> String {
        var out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        write(root, into: &out, depth: 0)
        return out
    }

    /// One element and its children, indented by `depth` (elements with text stay on one line).
    public static func write(_ e: SVGElement, into out: inout String, depth: Int) {
        precondition(isName(e.name), "bad element name \(e.name)")
        out += String(repeating: " ", count: depth)
        out += "<" + e.name
        for a in e.attributes {
            precondition(isName(a.name), "bad attribute name \(a.name)")
            out += " " + a.name + "=\"" + escape(a.value, attribute: true) + "\""
        }
        if e.children.isEmpty {
            out += "/>\n"
            return
        }
        let onlyText = e.children.allSatisfy { if case .text = $0 { true } else { false } }
        if onlyText {
            out += ">" + escape(e.text, attribute: false) + "</" + e.name + ">\n"
            return
        }
        out += ">\n"
        for c in e.children {
            switch c {
            case let .element(child): write(child, into: &out, depth: depth + 1)
            case let .text(t): out += String(repeating: " ", count: depth + 1) + escape(t, attribute: false) + "\n"
            }
        }
        out += String(repeating: " ", count: depth) + "</" + e.name + ">\n"
    }

    /// Escapes `&`, `<`, `>` (and in attributes `"` and `'`); characters XML 1.0 does not allow
    /// (C0 controls other than tab, newline and carriage return, U+FFFE, U+FFFF) become U+FFFD.
    public static func escape(_ s: String, attribute: Bool) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for u in s.unicodeScalars {
            switch u {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"" where attribute: out += "&quot;"
            case "'" where attribute: out += "&apos;"
            case "\t", "\n", "\r":
                // Whitespace in attributes is normalised by XML parsers; keep it as a reference.
                out += attribute ? "&#\(u.value);" : String(u)
            default:
                if u.value < 0x20 || u.value == 0xFFFE || u.value == 0xFFFF || (0x7F...0x9F).contains(u.value) {
                    out.unicodeScalars.append("\u{FFFD}")
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        return out
    }

    /// An XML name as the charts use them: letters, digits, `-`, `_`, `:`, not starting with a digit or `-`.
    static func isName(_ s: String) -> Bool {
        guard let f = s.unicodeScalars.first, f.properties.isAlphabetic || f == "_" else { return false }
        return s.unicodeScalars.allSatisfy {
            $0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_" || $0 == ":"
        }
    }
}

/// Builders for the few shapes the charts draw; each returns an ``SVGElement``.
public enum SVG {
    public static func root(width: Double, height: Double, title: String, children: [SVGElement]) -> SVGElement {
        var e = SVGElement(
            "svg",
            [
                SVGAttribute("xmlns", "http://www.w3.org/2000/svg"),
                SVGAttribute("version", "1.1"),
                SVGAttribute("width", width), SVGAttribute("height", height),
                SVGAttribute("viewBox", "0 0 \(SVGNumber.format(width)) \(SVGNumber.format(height))"),
                SVGAttribute("font-family", Style.fontFamily),
            ])
        e.append(SVGElement("title", children: [.text(title)]))
        e.append(rect(x: 0, y: 0, width: width, height: height, fill: "#FFFFFF", classes: "background"))
        e.append(contentsOf: children)
        return e
    }

    public static func group(_ classes: String? = nil, _ extra: [SVGAttribute] = [], _ children: [SVGElement])
        -> SVGElement
    {
        var attrs: [SVGAttribute] = []
        if let classes { attrs.append(SVGAttribute("class", classes)) }
        return SVGElement("g", attrs + extra, children: children.map(SVGNode.element))
    }

    public static func rect(
        x: Double, y: Double, width: Double, height: Double, fill: String, stroke: String? = nil,
        classes: String? = nil, extra: [SVGAttribute] = []
    ) -> SVGElement {
        var a = [
            SVGAttribute("x", x), SVGAttribute("y", y), SVGAttribute("width", max(0, width)),
            SVGAttribute("height", max(0, height)),
            SVGAttribute("fill", fill),
        ]
        if let stroke { a.append(SVGAttribute("stroke", stroke)) }
        if let classes { a.insert(SVGAttribute("class", classes), at: 0) }
        return SVGElement("rect", a + extra)
    }

    public static func line(
        _ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, stroke: String, width: Double = 1,
        dash: String? = nil, classes: String? = nil, extra: [SVGAttribute] = []
    ) -> SVGElement {
        var a = [
            SVGAttribute("x1", x1), SVGAttribute("y1", y1), SVGAttribute("x2", x2), SVGAttribute("y2", y2),
            SVGAttribute("stroke", stroke), SVGAttribute("stroke-width", width),
        ]
        if let dash { a.append(SVGAttribute("stroke-dasharray", dash)) }
        if let classes { a.insert(SVGAttribute("class", classes), at: 0) }
        return SVGElement("line", a + extra)
    }

    public static func polyline(
        _ points: [(Double, Double)], stroke: String, width: Double = 2, dash: String? = nil,
        classes: String? = nil, extra: [SVGAttribute] = []
    ) -> SVGElement {
        let pts = points.map { SVGNumber.format($0.0) + "," + SVGNumber.format($0.1) }.joined(separator: " ")
        var a = [
            SVGAttribute("points", pts), SVGAttribute("fill", "none"), SVGAttribute("stroke", stroke),
            SVGAttribute("stroke-width", width), SVGAttribute("stroke-linejoin", "round"),
        ]
        if let dash { a.append(SVGAttribute("stroke-dasharray", dash)) }
        if let classes { a.insert(SVGAttribute("class", classes), at: 0) }
        return SVGElement("polyline", a + extra)
    }

    public enum Anchor: String, Sendable { case start, middle, end }

    public static func text(
        _ s: String, x: Double, y: Double, size: Double = Style.fontSize, anchor: Anchor = .start,
        weight: String? = nil, fill: String = Style.ink, classes: String? = nil,
        rotate: Double? = nil, extra: [SVGAttribute] = []
    ) -> SVGElement {
        var a = [SVGAttribute("x", x), SVGAttribute("y", y), SVGAttribute("font-size", size)]
        if anchor != .start { a.append(SVGAttribute("text-anchor", anchor.rawValue)) }
        if let weight { a.append(SVGAttribute("font-weight", weight)) }
        a.append(SVGAttribute("fill", fill))
        if let rotate {
            a.append(
                SVGAttribute(
                    "transform", "rotate(\(SVGNumber.format(rotate)) \(SVGNumber.format(x)) \(SVGNumber.format(y)))"))
        }
        if let classes { a.insert(SVGAttribute("class", classes), at: 0) }
        return SVGElement("text", a + extra, children: [.text(s)])
    }

    /// A marker of `shape` centred on (x, y), `size` across.
    public static func marker(
        _ shape: MarkerShape, x: Double, y: Double, size: Double = 9, fill: String, stroke: String = Style.ink,
        classes: String? = nil, extra: [SVGAttribute] = []
    ) -> SVGElement {
        let r = size / 2
        var a: [SVGAttribute]
        switch shape {
        case .circle:
            return SVGElement(
                "circle",
                (classes.map { [SVGAttribute("class", $0)] } ?? []) + [
                    SVGAttribute("cx", x), SVGAttribute("cy", y), SVGAttribute("r", r), SVGAttribute("fill", fill),
                    SVGAttribute("stroke", stroke), SVGAttribute("stroke-width", 1),
                ] + extra)
        case .square:
            return rect(
                x: x - r * 0.9, y: y - r * 0.9, width: r * 1.8, height: r * 1.8, fill: fill, stroke: stroke,
                classes: classes,
                extra: [SVGAttribute("stroke-width", 1)] + extra)
        case .triangleUp:
            a = [SVGAttribute("points", poly([(x, y - r * 1.15), (x + r, y + r * 0.75), (x - r, y + r * 0.75)]))]
        case .triangleDown:
            a = [SVGAttribute("points", poly([(x, y + r * 1.15), (x + r, y - r * 0.75), (x - r, y - r * 0.75)]))]
        case .diamond: a = [SVGAttribute("points", poly([(x, y - r * 1.2), (x + r, y), (x, y + r * 1.2), (x - r, y)]))]
        case .cross:
            let d = r * 0.8
            return SVGElement(
                "path",
                (classes.map { [SVGAttribute("class", $0)] } ?? []) + [
                    SVGAttribute(
                        "d",
                        "M\(f(x - d)),\(f(y - d))L\(f(x + d)),\(f(y + d))M\(f(x - d)),\(f(y + d))L\(f(x + d)),\(f(y - d))"
                    ),
                    SVGAttribute("stroke", stroke), SVGAttribute("stroke-width", 2), SVGAttribute("fill", "none"),
                ] + extra)
        }
        a += [SVGAttribute("fill", fill), SVGAttribute("stroke", stroke), SVGAttribute("stroke-width", 1)]
        if let classes { a.insert(SVGAttribute("class", classes), at: 0) }
        return SVGElement("polygon", a + extra)
    }

    private static func f(_ v: Double) -> String { SVGNumber.format(v) }
    private static func poly(_ p: [(Double, Double)]) -> String {
        p.map { f($0.0) + "," + f($0.1) }.joined(separator: " ")
    }
}

public enum MarkerShape: String, Sendable, CaseIterable {
    case circle, square, triangleUp, triangleDown, diamond, cross
}
