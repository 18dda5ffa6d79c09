// SPDX-License-Identifier: GPL-2.0-or-later

import Foundation
import Testing

/// The README's "cuff in your own tests" shows code that compiles: the example package's test,
/// whole, and lines of this target's socket test.
@Suite("CuffTesting: the README's code")
struct ReadmeTests {
    static let root = capturesDirectory.deletingLastPathComponent()

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    @Test func theReadmeShowsTheExamplesTestAsItIs() throws {
        let readme = try Self.text("README.md")
        let example = try Self.text("Examples/ReplayInTests/Tests/ReplayInTestsTests/CuffInMyTests.swift")
        let body = try #require(example.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).last)
        #expect(body.contains("CuffReplay.replay"))
        #expect(readme.contains("```swift\n" + body + "```"))
    }

    @Test func theReadmeShowsTheExamplesManifest() throws {
        let manifest = try Self.text("Examples/ReplayInTests/Package.swift")
        let body = try #require(manifest.range(of: "let package = Package(")).lowerBound
        #expect(manifest.contains(".product(name: \"CuffTesting\", package: \"cuff\")"))
        #expect(try Self.text("README.md").contains("```swift\n" + manifest[body...] + "```"))
    }

    @Test func theServerSnippetIsThisTargetsCode() throws {
        let readme = try Self.text("README.md")
        let tests = try Self.text("Tests/CuffTestingTests/SimulatedCuffTests.swift")
        let start = try #require(readme.range(of: "```swift\nlet server = SimulatedCuffServer"))
        let end = try #require(readme[start.upperBound...].range(of: "```"))
        let snippet = readme[readme.index(start.lowerBound, offsetBy: "```swift\n".count)..<end.lowerBound]
        for line in snippet.split(separator: "\n") {
            #expect(tests.contains("        " + line + "\n"), "\(line)")
        }
    }
}
