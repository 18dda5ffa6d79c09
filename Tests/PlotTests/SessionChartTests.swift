// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Plot
import PlotIO
import Testing

/// A summary of a session SVG's structure, read back with an XML parser: what the golden files hold.
func sessionSummary(_ root: XNode) -> String {
    var out: [String] = []
    for panel in root.having("panel") {
        out.append("panel \(panel.attributes["data-session"] ?? "?"): \(panel.having("title").first?.text ?? "")")
        for c in panel.having("curve") {
            let phase = c.classes.contains("inflating") ? "inflating" : "deflating"
            let points = (c.attributes["points"] ?? "").split(separator: " ").count
            out.append("  curve \(phase) samples=\(c.attributes["data-samples"] ?? "?") points=\(points)")
        }
        for kind in ["systolic", "map", "diastolic"] {
            for m in panel.having("result-marker", kind) {
                out.append(
                    "  marker \(kind) value=\(m.attributes["data-value"] ?? "?") time=\(m.attributes["data-time"] ?? "?")"
                )
            }
        }
        for l in panel.having("result-label") { out.append("  label \(l.text)") }
        for v in panel.having("box-value") { out.append("  box \(v.text)") }
        for f in panel.having("flag") { out.append("  flag \(f.text)") }
        let gaps = panel.having("gap")
        if !gaps.isEmpty {
            out.append(
                "  gaps \(gaps.count): \(Set(gaps.compactMap { $0.attributes["data-value"] }).sorted().joined(separator: ","))"
            )
        }
        for n in panel.having("note") { out.append("  note \(n.text)") }
    }
    return out.joined(separator: "\n") + "\n"
}

func sessionSVG(_ name: String, capture: Bool = false) throws -> String {
    let url = Paths.captures.appendingPathComponent(name + (capture ? ".btsnoop" : ".ndjson"))
    let sessions = try PlotInput.sessions([UInt8](try Data(contentsOf: url)))
    return SVGWriter.document(
        SessionChart.document(sessions.enumerated().map { ($0.offset + 1, $0.element) }, source: "captures/\(name)"))
}

@Suite struct SessionChartTests {
    /// Every fixture: the SVG parses, and its structure matches the golden summary
    /// (`CUFF_UPDATE_GOLDEN=1 swift test --filter PlotTests` rewrites them; review the diff).
    @Test(arguments: Paths.fixtures)
    func goldenStructure(_ name: String) throws {
        let root = try SVGParse.parse(try sessionSVG(name))
        let summary = sessionSummary(root)
        let file = Paths.golden.appendingPathComponent(name + ".txt")
        if ProcessInfo.processInfo.environment["CUFF_UPDATE_GOLDEN"] != nil {
            try summary.write(to: file, atomically: true, encoding: .utf8)
        }
        let golden = try String(contentsOf: file, encoding: .utf8)
        #expect(summary == golden, "structure of captures/\(name).ndjson's plot changed")
    }

    /// A capture replayed in process plots exactly as the NDJSON `cuff replay` printed for it.
    @Test(arguments: Paths.fixtures)
    func captureAndItsNDJSONPlotTheSame(_ name: String) throws {
        #expect(try sessionSVG(name, capture: true) == (try sessionSVG(name)))
    }

    @Test func curvePointsAreTheProgressRecords() throws {
        for name in Paths.fixtures {
            let lines = try String(contentsOf: Paths.captures.appendingPathComponent(name + ".ndjson"), encoding: .utf8)
                .split(separator: "\n")
            let numeric = lines.filter { $0.contains("\"type\":\"progress\"") && !$0.contains("\"cuff_pressure\":\"") }
                .count
            let root = try SVGParse.parse(try sessionSVG(name))
            let drawn = root.having("curve").compactMap { $0.number("data-samples") }.reduce(0, +)
            #expect(Int(drawn) == numeric, "\(name)")
        }
    }

    @Test func normalResultIsMarkedOnTheDeflatingCurve() throws {
        let root = try SVGParse.parse(try sessionSVG("normal"))
        let panel = try #require(root.having("panel").first)
        #expect(root.having("panel").count == 1)
        let sys = try #require(panel.having("result-marker", "systolic").first)
        let dia = try #require(panel.having("result-marker", "diastolic").first)
        let map = try #require(panel.having("result-marker", "map").first)
        #expect(sys.attributes["data-value"] == "119")
        #expect(dia.attributes["data-value"] == "80")
        #expect(map.attributes["data-value"] == "93")
        // Systolic is passed first while the cuff deflates, then MAP, then diastolic.
        let ts = try [sys, map, dia].map { try #require($0.number("data-time")) }
        #expect(ts[0] < ts[1] && ts[1] < ts[2])
        let deflating = try #require(panel.having("curve", "deflating").first)
        #expect(panel.having("curve", "inflating").count == 1)
        #expect(deflating.attributes["stroke-dasharray"] == nil)
        #expect(panel.having("box-value").map(\.text).contains("Pulse 74 /min"))
        #expect(
            panel.having("title").first?.text.contains("cuff-sim (cuff project CUFF-SIM 1) 00:AA:01:00:00:00") == true)
        #expect(panel.having("subtitle").first?.text.contains("cuff unit: mmHg") == true)
        #expect(panel.having("subtitle").first?.text.contains("started 2026-11-22 08:13:20 UTC") == true)
        #expect(panel.having("flag").isEmpty)
        #expect(panel.having("box-line").map(\.text).contains("status: no flag set"))
    }

    @Test(arguments: [
        ("body-movement", ["⚠ body movement"]), ("cuff-loose", ["⚠ cuff too loose"]),
        ("irregular-pulse", ["⚠ irregular pulse"]),
        ("improper-position", ["⚠ improper position"]), ("hypertensive", ["⚠ pulse above upper limit"]),
        ("hypotensive", ["⚠ pulse below lower limit"]),
    ])
    func flagsThatWereSetAreLabelled(_ name: String, _ flags: [String]) throws {
        let root = try SVGParse.parse(try sessionSVG(name))
        #expect(root.having("flag").map(\.text) == flags)
    }

    @Test func specialValuesAreNotesNotZeros() throws {
        let root = try SVGParse.parse(try sessionSVG("error"))
        #expect(root.having("result-marker").isEmpty)
        #expect(root.having("box-value").map(\.text).contains("SYS NaN (no value)"))
        let notes = root.having("note").map(\.text).joined(separator: " ")
        #expect(notes.contains("special values (systolic NaN, diastolic NaN, mean arterial pressure NaN, pulse NaN)"))
        #expect(notes.contains("not plotted as 0"))
    }

    @Test func specialCuffPressuresAreGaps() throws {
        // normal's records with two cuff pressures made special.
        var lines = try String(contentsOf: Paths.captures.appendingPathComponent("normal.ndjson"), encoding: .utf8)
            .split(separator: "\n").map(String.init)
        let progress = lines.indices.filter {
            lines[$0].contains("\"type\":\"progress\"") && lines[$0].contains("deflating")
        }
        for i in [progress[10], progress[11]] {
            lines[i] = lines[i].replacingOccurrences(
                of: #""cuff_pressure":[0-9.]+"#, with: #""cuff_pressure":"NRes""#, options: .regularExpression)
        }
        let sessions = try PlotInput.sessions(lines: lines)
        let root = try SVGParse.parse(SVGWriter.document(SessionChart.document([(1, sessions[0])], source: "t")))
        #expect(root.having("gap").count == 2)
        #expect(root.having("gap").allSatisfy { $0.attributes["data-value"] == "NRes" })
        #expect(root.having("curve", "deflating").count == 2)  // the gap splits the deflating curve
        #expect(
            root.having("note").map(\.text).joined().contains(
                "2 cuff-pressure values were a special value (NRes): drawn as gaps"))
        // No point of any curve sits on the zero line.
        let zeroY = 64 + 290.0
        for c in root.having("curve", "deflating") {
            for p in (c.attributes["points"] ?? "").split(separator: " ") {
                #expect(Double(p.split(separator: ",")[1])! < zeroY - 20)
            }
        }
    }

    @Test func kPaSessionsKeepTheirUnit() throws {
        let root = try SVGParse.parse(try sessionSVG("kpa"))
        #expect(root.having("axis-title", "y").first?.text == "cuff pressure (kPa)")
        #expect(root.having("result-marker", "systolic").first?.attributes["data-value"] == "15.9")
        #expect(root.having("box-value").map(\.text).contains("SYS 15.9 kPa (119 mmHg)"))
    }

    /// A kPa result in an mmHg session (probe I) is marked where its value lies in mmHg: the same
    /// place on the deflating curve as the mmHg result it equals, not at its raw number.
    @Test func aResultInTheOtherUnitIsMarkedInTheSessionsUnit() throws {
        let url = Paths.captures.appendingPathComponent("normal.ndjson")
        let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n").map(String.init)
        let kpa = lines.map { line -> String in
            guard line.contains("\"type\":\"measurement\"") else { return line }
            return
                line
                .replacingOccurrences(of: "\"unit\":\"mmHg\"", with: "\"unit\":\"kPa\"")
                .replacingOccurrences(of: "\"systolic\":119.0", with: "\"systolic\":15.9")
                .replacingOccurrences(of: "\"diastolic\":80.0", with: "\"diastolic\":10.7")
                .replacingOccurrences(of: "\"mean_arterial_pressure\":93.0", with: "\"mean_arterial_pressure\":12.4")
        }
        #expect(kpa != lines)
        func times(_ text: String) throws -> [Double] {
            let sessions = try PlotInput.sessions(Array(text.utf8))
            let root = try SVGParse.parse(
                SVGWriter.document(
                    SessionChart.document(sessions.enumerated().map { ($0.offset + 1, $0.element) }, source: "t")))
            return try ["systolic", "map", "diastolic"].map { k in
                try #require(root.having("result-marker", k).first?.number("data-time"))
            }
        }
        let mmHg = try times(lines.joined(separator: "\n") + "\n")
        let converted = try times(kpa.joined(separator: "\n") + "\n")
        for (a, b) in zip(mmHg, converted) { #expect(abs(a - b) < 1.5, "\(mmHg) vs \(converted)") }
    }

    @Test func storedReadingsAreListedNotMarked() throws {
        let root = try SVGParse.parse(try sessionSVG("stored-records"))
        #expect(root.having("result-marker", "systolic").map { $0.attributes["data-value"] } == ["120"])
        #expect(
            root.having("note").map(\.text).joined(separator: " ").contains(
                "3 stored readings also came in this session"))
    }

    @Test func aSessionWithoutAResultSaysHowItEnded() throws {
        let root = try SVGParse.parse(try sessionSVG("disconnect"))
        #expect(root.having("result-marker").isEmpty)
        #expect(root.having("box-heading").first?.text == "No result")
        #expect(root.having("note").map(\.text).joined().contains("The session ended: disconnected"))
    }

    @Test func severalSessionsGiveOnePanelEach() throws {
        let one = try String(contentsOf: Paths.captures.appendingPathComponent("normal.ndjson"), encoding: .utf8)
        let two = try String(contentsOf: Paths.captures.appendingPathComponent("body-movement.ndjson"), encoding: .utf8)
        let sessions = try PlotInput.sessions(Array((one + two).utf8))
        #expect(sessions.count == 2)
        let root = try SVGParse.parse(
            SVGWriter.document(
                SessionChart.document(sessions.enumerated().map { ($0.offset + 1, $0.element) }, source: "t")))
        #expect(root.having("panel").map { $0.attributes["data-session"] } == ["1", "2"])
        #expect(root.having("panel")[1].having("title").first?.text.hasPrefix("Session 2 of 2") == true)
    }

    @Test func badInputIsAnErrorWithItsLine() {
        #expect(
            throws: PlotInputError.badLine(
                line: 2, reason: "not JSON (cuff plot reads cuff's NDJSON output or a capture file)")
        ) {
            try PlotInput.sessions(Array("{\"type\":\"other\"}\nhello\n".utf8))
        }
        #expect(throws: PlotInputError.noSessions) { try PlotInput.sessions(Array("{\"type\":\"device\"}\n\n".utf8)) }
        #expect(PlotInput.sniff(Array("btsnoop\0xyz".utf8)) == .btsnoop)
        #expect(PlotInput.sniff([0xD4, 0xC3, 0xB2, 0xA1, 0]) == .pcap)
        #expect(PlotInput.sniff([0x0A, 0x0D, 0x0D, 0x0A]) == .pcapng)
        #expect(PlotInput.sniff(Array("{\"type\"".utf8)) == nil)
    }
}

extension SessionChartTests {
    /// A session that only fetched stored readings (no cuff pressure): no curve, no marker, the
    /// readings listed.
    @Test func onlyStoredReadings() throws {
        let lines = try String(
            contentsOf: Paths.captures.appendingPathComponent("stored-records.ndjson"), encoding: .utf8
        )
        .split(separator: "\n").map(String.init)
        .filter {
            !$0.contains("\"type\":\"progress\"")
                && !($0.contains("\"type\":\"measurement\"") && $0.contains("\"stored\":false"))
        }
        let sessions = try PlotInput.sessions(lines: lines)
        let root = try SVGParse.parse(SVGWriter.document(SessionChart.document([(1, sessions[0])], source: "t")))
        #expect(root.having("curve").isEmpty)
        #expect(root.having("result-marker").isEmpty)
        #expect(root.having("box-heading").first?.text == "No new result")
        let notes = root.having("note").map(\.text).joined(separator: " ")
        #expect(notes.contains("No cuff-pressure values in this session"))
        #expect(notes.contains("3 stored readings also came in this session"))
    }
}

extension SessionChartTests {
    /// Two cuffs measuring at once (two controllers): each cuff's measurement and end records go
    /// to its own session, by the address they name, whatever came between (probe Q #3: a third,
    /// empty panel, and one cuff's readings under the other's title).
    @Test func overlappingSessionsOfTwoCuffsKeepTheirOwnRecords() throws {
        func lines(_ name: String) throws -> [String] {
            try String(contentsOf: Paths.captures.appendingPathComponent(name), encoding: .utf8)
                .split(separator: "\n").map(String.init)
        }
        // Cuff B: stored-records' session under another address, without its progress records.
        let b = try lines("stored-records.ndjson")
            .filter { !$0.contains("\"type\":\"progress\"") }
            .map { $0.replacingOccurrences(of: "00:AA:01:00:00:00", with: "00:AA:01:00:00:02") }
        let a = try lines("normal.ndjson")
        // B starts first; A starts, then their records alternate; A ends before B.
        let bBody = Array(b[1..<(b.count - 1)])
        let aBody = Array(a[1..<(a.count - 1)])
        var mixed = [b[0], a[0]]
        for i in 0..<max(aBody.count, bBody.count) {
            if i < aBody.count { mixed.append(aBody[i]) }
            if i < bBody.count { mixed.append(bBody[i]) }
        }
        mixed += [a[a.count - 1], b[b.count - 1]]
        let sessions = try PlotInput.sessions(lines: mixed)
        #expect(sessions.count == 2)
        #expect(sessions.map(\.device.address) == ["00:AA:01:00:00:02", "00:AA:01:00:00:00"])
        let count = { (l: [String]) in l.filter { $0.contains("\"type\":\"measurement\"") }.count }
        #expect(sessions[0].results.count == count(b))
        #expect(sessions[0].results.count == 4)
        #expect(sessions[1].results.count == count(a))
        #expect(sessions[0].samples.isEmpty)
        #expect(sessions[1].samples.count == a.filter { $0.contains("\"type\":\"progress\"") }.count)
        #expect(sessions.allSatisfy { $0.outcome == "completed" })
        // Each as the same session read alone.
        #expect(sessions[1] == (try PlotInput.sessions(lines: a))[0])
    }

    /// A cuff's session with no end record (a cut input) ends where its next one starts; records
    /// outside any session still get a session of their own.
    @Test func aSessionWithoutItsEndAndLooseRecords() throws {
        let a = try String(contentsOf: Paths.captures.appendingPathComponent("normal.ndjson"), encoding: .utf8)
            .split(separator: "\n").map(String.init)
        let cut = Array(a.dropLast())
        let sessions = try PlotInput.sessions(lines: cut + a + Array(a[1..<(a.count - 1)]))
        #expect(sessions.count == 3)
        #expect(sessions[0].outcome == nil)
        #expect(sessions[1].outcome == "completed")
        #expect(sessions[0].results == sessions[1].results)
        #expect(sessions[2].samples == sessions[1].samples)
        #expect(sessions[2].startedAt == nil)
    }
}

/// Probe C3: `cuff plot --session N` of a big input held every record of every session (964 MB
/// for a 150 MB capture). The input is read as it streams, and only the chosen session keeps
/// its samples and results; the others are counted.
@Suite struct StreamedPlotInputTests {
    static func file(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-plot-\(UUID().uuidString)").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static let three = ["normal", "body-movement", "kpa"]

    @Test func onlyTheKeptSessionKeepsItsRecords() throws {
        let text = try Self.three.map {
            try String(contentsOf: Paths.captures.appendingPathComponent($0 + ".ndjson"), encoding: .utf8)
        }.joined()
        let path = try Self.file(text)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let all = try PlotInput.sessions(path: path)
        #expect(all.fault == nil && all.sessions.count == 3)
        #expect(all.sessions.allSatisfy { !$0.samples.isEmpty && !$0.results.isEmpty })
        for k in 1...3 {
            let kept = try PlotInput.sessions(path: path, keep: k)
            #expect(kept.sessions.count == 3)
            for (i, s) in kept.sessions.enumerated() {
                if i + 1 == k {
                    #expect(s == all.sessions[i])
                } else {
                    #expect(s.samples.isEmpty && s.results.isEmpty && s.outcome == all.sessions[i].outcome)
                }
            }
        }
        // The same from the bytes in memory, and from the capture replayed as it is read.
        #expect(try PlotInput.sessions(Array(text.utf8)) == all.sessions)
        let capture = Paths.captures.appendingPathComponent("normal.btsnoop").path
        let fromCapture = try PlotInput.sessions(path: capture)
        #expect(fromCapture.fault == nil)
        #expect(
            fromCapture.sessions
                == (try PlotInput.sessions([UInt8](try Data(contentsOf: URL(fileURLWithPath: capture))))))
        #expect(fromCapture.sessions.first?.results.first?.systolic == .number(119))
    }

    /// Lines split across read chunks, CRLF ends, a last line with no end; a line too long to
    /// be a record is an error with its number, not a buffer that grows with it.
    @Test func linesAcrossChunksAndALineTooLong() throws {
        let record = try String(contentsOf: Paths.captures.appendingPathComponent("normal.ndjson"), encoding: .utf8)
        var text = ""
        while text.utf8.count < 300_000 { text += record.replacingOccurrences(of: "\n", with: "\r\n") }
        // (No end on the last line; "\r\n" is one Character.)
        let path = try Self.file(String(text.dropLast()))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let got = try PlotInput.sessions(path: path).sessions
        #expect(got.count == text.components(separatedBy: "\"event\":\"start\"").count - 1)
        #expect(got.allSatisfy { $0.results.first?.systolic == .number(119) })

        let long = try Self.file(record + String(repeating: " ", count: PlotInput.maximumLineBytes + 10) + "x\n")
        defer { try? FileManager.default.removeItem(atPath: long) }
        let lines = record.split(separator: "\n").count
        #expect(
            throws: PlotInputError.badLine(
                line: lines + 1, reason: "longer than \(PlotInput.maximumLineBytes) bytes: not a record")
        ) {
            try PlotInput.sessions(path: long)
        }
    }
}
