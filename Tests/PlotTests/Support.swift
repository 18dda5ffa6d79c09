// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Plot
import Testing
#if canImport(FoundationXML)
    import FoundationXML
#endif

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

enum Paths {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let captures = packageRoot.appendingPathComponent("captures")
    static let golden = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden")

    /// The fixture names (`normal`, `kpa`, …) that have both a capture and its NDJSON.
    static var fixtures: [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: captures.path)) ?? []
        return names.filter { $0.hasSuffix(".ndjson") }.map { String($0.dropLast(7)) }.sorted()
    }

    static func tempDir() throws -> URL {
        let d = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-plot-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: d, withIntermediateDirectories: true)
        return d
    }
}

/// An element of a parsed SVG document: what an XML parser (not our writer) saw.
final class XNode {
    let name: String
    let attributes: [String: String]
    var children: [XNode] = []
    var text = ""
    init(name: String, attributes: [String: String]) {
        self.name = name
        self.attributes = attributes
    }

    var all: [XNode] { [self] + children.flatMap(\.all) }
    var classes: Set<String> { Set((attributes["class"] ?? "").split(separator: " ").map(String.init)) }
    func having(_ cls: String...) -> [XNode] { all.filter { n in cls.allSatisfy { n.classes.contains($0) } } }
    func number(_ a: String) -> Double? { attributes[a].flatMap(Double.init) }
}

/// Parses SVG text with Foundation's XMLParser: a document our writer made must be well-formed XML.
final class SVGParse: NSObject, XMLParserDelegate {
    private var stack: [XNode] = []
    private(set) var root: XNode?
    private(set) var error: String?

    static func parse(_ text: String) throws -> XNode {
        let p = XMLParser(data: Data(text.utf8))
        let d = SVGParse()
        p.delegate = d
        guard p.parse(), let root = d.root else {
            throw TestFailure("not well-formed XML: \(p.parserError.map { String(describing: $0) } ?? d.error ?? "?")")
        }
        return root
    }

    func parser(
        _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        let n = XNode(name: name, attributes: attributes)
        stack.last?.children.append(n)
        if stack.isEmpty { root = n }
        stack.append(n)
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        stack.removeLast()
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        stack.last?.text += string
    }
}

/// PNG facts: the IHDR's width and height.
enum PNG {
    static func size(_ data: Data) throws -> (width: Int, height: Int) {
        let b = [UInt8](data.prefix(24))
        guard b.count == 24, b.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]),
            Array(b[12..<16]) == Array("IHDR".utf8)
        else {
            throw TestFailure("not a PNG")
        }
        func be(_ i: Int) -> Int { Int(b[i]) << 24 | Int(b[i + 1]) << 16 | Int(b[i + 2]) << 8 | Int(b[i + 3]) }
        return (be(16), be(20))
    }
}
