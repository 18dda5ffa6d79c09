// SPDX-License-Identifier: GPL-2.0-or-later
import CuffTestSupport
import Foundation
import Testing

/// `cuff plot` end to end: the binary, its files and its exit statuses.
@Suite struct PlotCommandTests {
    static func tempDir() throws -> URL {
        let d = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-plot-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: d, withIntermediateDirectories: true)
        return d
    }

    static func capture(_ name: String) -> String { CLI.packageRoot.appendingPathComponent("captures/\(name)").path }

    @Test func aReplayedCaptureBecomesAnSVG() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("normal.svg").path
        let r = try CLI.run(["plot", Self.capture("normal.btsnoop"), "--output", out])
        #expect(r.status == 0, "\(r.stderr)")
        let svg = try String(contentsOfFile: out, encoding: .utf8)
        #expect(svg.hasPrefix("<?xml"))
        #expect(svg.contains("class=\"result-marker systolic\""))
        #expect(svg.contains("data-value=\"119\""))
    }

    @Test func ndjsonFromStdinAndOneSessionOfSeveral() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let two =
            try String(contentsOfFile: Self.capture("normal.ndjson"), encoding: .utf8)
            + String(contentsOfFile: Self.capture("body-movement.ndjson"), encoding: .utf8)
        let out = dir.appendingPathComponent("s2.svg").path
        let r = try CLI.run(["plot", "-", "--session", "2", "--output", out], stdin: two)
        #expect(r.status == 0, "\(r.stderr)")
        let svg = try String(contentsOfFile: out, encoding: .utf8)
        #expect(svg.contains("data-session=\"2\""))
        #expect(!svg.contains("data-session=\"1\""))
        #expect(svg.contains("⚠ body movement"))

        let missing = try CLI.run(["plot", "-", "--session", "3", "--output", out], stdin: two)
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("there is no session 3: the input holds 2 sessions"))
    }

    /// Probe C3: a capture damaged after its measurement (a record whose length lies, an L2CAP
    /// frame longer than its fragments) was drawn with nothing said and exit 0, where `cuff
    /// replay` exits 1 and names the offset. What came before the fault is still drawn.
    @Test(arguments: ["cut", "lying-length"])
    func aDamagedCaptureIsDrawnAsFarAsItGoesAndSaidWithStatus1(damage: String) throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Self.capture("normal.btsnoop"))))
        let replayed = try CLI.run(["replay", Self.capture("normal.btsnoop")])
        let lines = replayed.stdoutLines
        #expect(lines.contains { $0.contains("\"type\":\"measurement\"") })
        // The last record (the disconnection): cut in its middle, or its included length a lie.
        var offset = 16
        var last = 16
        while offset + 24 <= bytes.count {
            last = offset
            let included =
                Int(bytes[offset + 4]) << 24 | Int(bytes[offset + 5]) << 16 | Int(bytes[offset + 6]) << 8
                | Int(bytes[offset + 7])
            offset += 24 + included
        }
        if damage == "cut" {
            bytes = Array(bytes[..<(last + 10)])
        } else {
            bytes.replaceSubrange((last + 4)..<(last + 8), with: [0xFF, 0xFF, 0xFF, 0xF0])
        }
        let input = dir.appendingPathComponent("damaged.btsnoop").path
        try Data(bytes).write(to: URL(fileURLWithPath: input))
        let out = dir.appendingPathComponent("d.svg").path
        let r = try CLI.run(["plot", input, "--output", out])
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("damaged.btsnoop: the capture is damaged: "), "\(r.stderr)")
        #expect(r.stderr.contains("at offset \(last)"), "\(r.stderr)")
        #expect(r.stderr.contains("what came before the fault is drawn"))
        let svg = try String(contentsOfFile: out, encoding: .utf8)
        #expect(svg.contains("data-value=\"119\""))
        let replay = try CLI.run(["replay", input])
        #expect(replay.status == 1 && replay.stderr.contains("at offset \(last)"), "\(replay.stderr)")
    }

    @Test func badInputsHaveTheirOwnStatuses() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("x.svg").path
        let notJSON = try CLI.run(["plot", "-", "--output", out], stdin: "hello\n")
        #expect(notJSON.status == 1)
        #expect(notJSON.stderr.contains("cuff plot: stdin: line 1: not JSON"))
        let noFile = try CLI.run(["plot", dir.appendingPathComponent("nope.ndjson").path, "--output", out])
        #expect(noFile.status == 1)
        #expect(noFile.stderr.contains("no such file"))
        #expect(!FileManager.default.fileExists(atPath: out))
        let url = try CLI.run(["plot", "--store", "postgres://localhost/cuff", "--output", out])
        #expect(url.status == 64)
        #expect(url.stderr.contains("store URLs (such as postgres://) are not supported yet"))
        let ext = try CLI.run([
            "plot", Self.capture("normal.ndjson"), "--output", dir.appendingPathComponent("x.jpg").path,
        ])
        #expect(ext.status == 64)
        let noStore = try CLI.run(["plot", "--store", dir.appendingPathComponent("none.sqlite").path, "--output", out])
        #expect(noStore.status == 10)
        #expect(noStore.stderr.contains("no such store"))
    }

    @Test func aStoreFilledByMeasureBecomesAHistory() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = dir.appendingPathComponent("bp.sqlite").path
        for scenario in ["normal", "hypertensive", "error"] {
            let m = try CLI.run(["measure", "--simulated", scenario, "--speed", "0", "--store", store, "--quiet"])
            #expect(m.status == 0 || scenario == "error", "\(m.stderr)")
        }
        let out = dir.appendingPathComponent("h.svg").path
        let r = try CLI.run(["plot", "--store", store, "--output", out, "--guideline", "acc-aha-2017"])
        #expect(r.status == 0, "\(r.stderr)")
        let svg = try String(contentsOfFile: out, encoding: .utf8)
        #expect(svg.components(separatedBy: "class=\"reading systolic\"").count - 1 == 2)
        #expect(svg.components(separatedBy: "class=\"gap systolic\"").count - 1 == 1)
        #expect(svg.contains("data-category=\"stage 2\""))
        let none = try CLI.run(["plot", "--store", store, "--user", "9", "--output", out])
        #expect(none.status == 3)
        #expect(none.stderr.contains("no reading matches --since/--user"))
        // Not a date, or no such day (2026-02-30 was once taken as March 2).
        for bad in ["22.11.2026", "2026-02-30", "2026-02-29", "2026-04-31"] {
            let badDate = try CLI.run(["plot", "--store", store, "--since", bad, "--output", out])
            #expect(badDate.status == 64, "\(bad)")
            #expect(badDate.stderr.contains("--since takes a date, YYYY-MM-DD; got '\(bad)'"))
        }
        #expect(try CLI.run(["plot", "--store", store, "--since", "2024-02-29", "--output", out]).status == 0)
    }

    /// Hand-written NDJSON with values no cuff sends: 1e19 trapped (SIGILL) in the label's digits,
    /// and ±1.7e308 made the tick loop append until memory ran out (17 GB in a minute). Each is
    /// drawn now, in bounded time and memory, its labels whole numbers without an exponent.
    @Test(arguments: [
        #"{"type":"measurement","systolic":1e19,"diastolic":80}"#,
        #"{"type":"progress","phase":"inflating","cuff_pressure":10,"elapsed":1e19}"#,
        #"{"type":"measurement","systolic":1.7e308,"diastolic":-1.7e308}"#,
        #"{"type":"progress","phase":"inflating","cuff_pressure":1.7e308,"elapsed":1.7e308}"#,
    ])
    func valuesNoCuffSendsAreDrawn(_ line: String) throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("huge.svg").path
        let r = try CLI.run(["plot", "-", "--output", out], stdin: line + "\n", timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
        let svg = try String(contentsOfFile: out, encoding: .utf8)
        #expect(svg.utf8.count < 200_000)
        #expect(!svg.contains("e+"))
    }

    @Test func pngNeedsRsvgConvert() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let png = dir.appendingPathComponent("n.png").path
        // Without rsvg-convert on PATH: a clear error, status 4, no file.
        let errURL = dir.appendingPathComponent("err")
        let p = try ChildProcess(
            ["PATH=/nonexistent", CLI.binary.path, "plot", Self.capture("normal.ndjson"), "--output", png],
            executable: "/usr/bin/env", stderr: errURL.path)
        #expect(p.wait(timeout: 60) == 4)
        #expect(
            try String(contentsOf: errURL, encoding: .utf8).contains(
                "PNG output needs rsvg-convert, which is not installed"))
        #expect(!FileManager.default.fileExists(atPath: png))
        // With it: a PNG.
        let hasRsvg = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").contains {
            FileManager.default.isExecutableFile(atPath: "\($0)/rsvg-convert")
        }
        guard hasRsvg else {
            if ProcessInfo.processInfo.environment["CI"] != nil { Issue.record("CI needs rsvg-convert (librsvg2-bin)") }
            return
        }
        let r = try CLI.run(["plot", Self.capture("normal.ndjson"), "--output", png])
        #expect(r.status == 0, "\(r.stderr)")
        let data = try Data(contentsOf: URL(fileURLWithPath: png))
        #expect(data.starts(with: [0x89, 0x50, 0x4E, 0x47]))
        #expect(data.count > 20_000)
    }

    /// Probe X: NDJSON saved with CRLF line ends was "line 1: not JSON" (in a Swift string "\r\n"
    /// is one Character, which a split on "\n" never matched). It plots as the LF file does.
    @Test func crlfLineEndsPlotAsLFOnesDo() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let lf = try String(contentsOfFile: Self.capture("normal.ndjson"), encoding: .utf8)
        let crlf = dir.appendingPathComponent("crlf.ndjson").path, plain = dir.appendingPathComponent("lf.ndjson").path
        try lf.replacingOccurrences(of: "\n", with: "\r\n").write(toFile: crlf, atomically: true, encoding: .utf8)
        try lf.write(toFile: plain, atomically: true, encoding: .utf8)
        var svgs: [String] = []
        for (input, name) in [(crlf, "crlf"), (plain, "lf")] {
            let out = dir.appendingPathComponent("\(name).svg").path
            let r = try CLI.run(["plot", input, "--output", out])
            #expect(r.status == 0, "\(name): \(r.stderr)")
            svgs.append(try String(contentsOfFile: out, encoding: .utf8).replacingOccurrences(of: input, with: "IN"))
        }
        #expect(svgs.count == 2 && svgs[0] == svgs[1] && svgs[0].contains("<polyline"))
    }

    /// Probe X: a PNG into a missing directory was "rsvg-convert failed" (status 4), and an SVG
    /// named a directory gave a Foundation error number; both are outputs that cannot be written (10).
    @Test func anOutputThatCannotBeWrittenIsSaidSoWithStatus10() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let folder = dir.appendingPathComponent("d.svg").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for (out, reason) in [
            (dir.appendingPathComponent("none/p.png").path, "no such directory"),
            (dir.appendingPathComponent("none/p.svg").path, "no such directory"),
            (folder, "is a directory"),
        ] {
            let r = try CLI.run(["plot", Self.capture("normal.ndjson"), "--output", out])
            #expect(r.status == 10, "\(out): \(r.stderr)")
            #expect(r.stderr.contains("cannot write \(out): \(reason)"), "\(r.stderr)")
        }
    }

    /// Probe X: the SVG went to rsvg-convert as a file in `$TMPDIR`, mode 0644 (readable by other
    /// users while it ran) and left behind when cuff was interrupted. It goes through a pipe now:
    /// a stand-in rsvg-convert that keeps its arguments and its stdin sees no file and the SVG.
    @Test func pngTakesTheSVGThroughAPipeNotATemporaryFile() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let bin = dir.appendingPathComponent("bin"), tmp = dir.appendingPathComponent("tmp")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)
        let args = dir.appendingPathComponent("args").path, input = dir.appendingPathComponent("stdin").path
        let fake = bin.appendingPathComponent("rsvg-convert").path
        try
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '\(args)'\ncat > '\(input)'\nls -A '\(tmp.path)' >> '\(args)'\nprintf 'png' > \"$6\"\n"
            .write(toFile: fake, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: fake)
        let png = dir.appendingPathComponent("p.png").path
        let r = try CLI.run(
            ["plot", Self.capture("normal.ndjson"), "--output", png],
            environment: ["PATH": "\(bin.path):/usr/bin:/bin", "TMPDIR": tmp.path])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(
            try String(contentsOfFile: args, encoding: .utf8)
                == "--format\npng\n--background-color\nwhite\n--output\n\(png)\n")
        let svg = try String(contentsOfFile: input, encoding: .utf8)
        #expect(svg.hasPrefix("<svg") || svg.hasPrefix("<?xml"), "\(svg.prefix(80))")
        #expect(svg.contains("</svg>"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp.path).isEmpty)
    }
}
