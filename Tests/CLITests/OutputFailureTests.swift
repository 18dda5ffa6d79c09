import CuffTestSupport
import Foundation
import Testing

/// Every subcommand that writes to stdout sees a failed write: exit 10 and a message. A reader that
/// goes away (EPIPE) ends cuff quietly with 141. Control characters never reach the terminal.
@Suite("stdout failures and stderr escaping")
struct OutputFailureTests {
    static let measurementHex = "1E 8A 00 58 00 78 00 00 00 04 11 14 29 3B 3C 00 01 27 00"

    static func tempFile(_ name: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("cuff-out-\(UUID().uuidString)-\(name)")
    }

    /// Runs cuff with stdout on `stdoutPath` (e.g. /dev/full); returns the status and stderr.
    static func run(_ args: [String], stdout: String, stdin: String = "/dev/null") throws -> (
        status: Int32?, stderr: String
    ) {
        let err = tempFile("err")
        defer { try? FileManager.default.removeItem(at: err) }
        let p = try ChildProcess(args, stdin: stdin, stdout: stdout, stderr: err.path)
        let status = p.wait(timeout: 120)
        if status == nil { p.signal(SIGKILL); _ = p.wait(timeout: 10) }
        return (status, try String(contentsOf: err, encoding: .utf8))
    }

    /// Runs `cuff ARGS | head -1 > /dev/null` in bash; returns cuff's status and stderr.
    static func runIntoHead(_ args: [String], stdin: String = "/dev/null") throws -> (status: Int32?, stderr: String) {
        let err = tempFile("err"), status = tempFile("status")
        defer { for f in [err, status] { try? FileManager.default.removeItem(at: f) } }
        let quoted = ([CLI.binary.path] + args).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
            .joined(separator: " ")
        let script = "\(quoted) 2>'\(err.path)' | head -n 1 > /dev/null; echo ${PIPESTATUS[0]} > '\(status.path)'"
        let p = try ChildProcess(["-c", script], executable: "/bin/bash", stdin: stdin)
        guard p.wait(timeout: 120) == 0 else {
            p.signal(SIGKILL)
            _ = p.wait(timeout: 10)
            return (nil, "")
        }
        let text = try String(contentsOf: status, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return (Int32(text), try String(contentsOf: err, encoding: .utf8))
    }

    @Test func decodeReportsAFullDisk() throws {
        let r = try Self.run(["decode", Self.measurementHex], stdout: "/dev/full")
        #expect(r.status == 10)
        #expect(r.stderr.contains("cuff decode: cannot write to stdout"))
        #expect(r.stderr.contains("No space left on device"))
    }

    @Test func decodeFromStdinReportsAFullDisk() throws {
        let input = Self.tempFile("in")
        defer { try? FileManager.default.removeItem(at: input) }
        try Data((Self.measurementHex + "\n").utf8).write(to: input)
        let r = try Self.run(["decode"], stdout: "/dev/full", stdin: input.path)
        #expect(r.status == 10)
        #expect(r.stderr.contains("No space left on device"))
    }

    @Test func historyAndSimulateListReportAFullDisk() throws {
        let r = try Self.run(["simulate", "--list"], stdout: "/dev/full")
        #expect(r.status == 10)
        #expect(r.stderr.contains("cuff simulate: cannot write to stdout"))

        let store = Self.tempFile("h.sqlite")
        defer { for s in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: store.path + s) } }
        let m = try CLI.run(["measure", "--simulated", "normal", "--speed", "0", "--quiet", "--store", store.path])
        #expect(m.status == 0)
        let h = try Self.run(["history", "--store", store.path], stdout: "/dev/full")
        #expect(h.status == 10)
        #expect(h.stderr.contains("cuff history: cannot write to stdout"))
        // The same store read to a working stdout: the status is 0, so the 10 above came from the write.
        let ok = try CLI.run(["history", "--store", store.path])
        #expect(ok.status == 0)
        #expect(ok.stdoutLines.count == 1)
    }

    @Test func historyOfAMissingStoreIsAFailedSink() throws {
        let r = try CLI.run(["history", "--store", Self.tempFile("none.sqlite").path])
        #expect(r.status == 10)
        #expect(r.stderr.contains("cannot open store"))
    }

    @Test func measureReportsAFullDisk() throws {
        let r = try Self.run(["measure", "--simulated", "normal", "--speed", "0", "--quiet"], stdout: "/dev/full")
        #expect(r.status == 10)
        #expect(r.stderr.contains("No space left on device"))
    }

    @Test func decodeIntoAReaderThatGoesAwayEndsQuietly() throws {
        // More output than a pipe holds, so cuff is still writing when head has gone.
        let input = Self.tempFile("in")
        defer { try? FileManager.default.removeItem(at: input) }
        try Data(String(repeating: Self.measurementHex + "\n", count: 3000).utf8).write(to: input)
        let r = try Self.runIntoHead(["decode"], stdin: input.path)
        #expect(r.status == 141)
        #expect(r.stderr.isEmpty)
    }

    @Test(arguments: [["--jobs", "1"], ["--jobs", "2"], ["--format", "fhir"]])
    func replayIntoAReaderThatGoesAwayEndsQuietly(options: [String]) throws {
        let file = Self.tempFile("joined.btsnoop")
        defer { try? FileManager.default.removeItem(at: file) }
        var joined = try ReplayCommandTests.joinedCaptures()
        let records = joined.dropFirst(16)
        for _ in 0..<8 { joined += records }  // a few MB of output
        try Data(joined).write(to: file)
        let r = try Self.runIntoHead(["replay", file.path] + options)
        #expect(r.status == 141)
        // Progress lines may come before head goes; no word of the broken pipe, and none after it.
        #expect(!r.stderr.contains("cannot write"))
        #expect(!r.stderr.contains("Broken pipe"))
        #expect(!r.stderr.contains("sessions,"))
    }

    @Test func controlCharactersInInputAreEscapedOnStderr() throws {
        let r = try CLI.run(["decode", "\u{1B}]0;title\u{07}\u{1B}[31m\u{9B}2J"])
        #expect(r.status == 1)
        #expect(!r.stderr.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" })
        #expect(!r.stderr.unicodeScalars.contains { (0x7F...0x9F).contains($0.value) })
        #expect(r.stderr.contains("\\x1B]0;title\\x07\\x1B[31m\\u{009B}2J"))
        // stdout keeps the text, JSON-escaped.
        #expect(r.stdout.contains("\\u001b]0;title\\u0007"))
    }

    @Test func controlCharactersInAFileNameAreEscapedOnStderr() throws {
        let name = Self.tempFile("bad\u{1B}[2Jname.btsnoop")
        defer { try? FileManager.default.removeItem(at: name) }
        try Data("garbage".utf8).write(to: name)
        let r = try CLI.run(["replay", name.path])
        #expect(r.status == 1)
        #expect(!r.stderr.contains("\u{1B}"))
        #expect(r.stderr.contains("bad\\x1B[2Jname"))
    }
}
