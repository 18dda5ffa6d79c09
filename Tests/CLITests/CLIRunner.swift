import CuffTestSupport
import Foundation
import Testing

/// Runs the built `cuff` binary and captures what it prints.
struct CLIResult {
    var status: Int32
    var stdout: String
    var stderr: String
    var stdoutLines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }
}

enum CLI {
    static var packageRoot: URL { CuffBinary.packageRoot }

    /// The cuff binary next to this test bundle (same build folder and configuration).
    static var binary: URL { URL(fileURLWithPath: CuffBinary.path) }

    @discardableResult
    static func run(
        _ args: [String], stdin: String? = nil, timeout: TimeInterval = 120, environment: [String: String] = [:]
    ) throws -> CLIResult {
        let r = try runToCompletion(CuffBinary.path, args, stdin: stdin, timeout: timeout, environment: environment)
        guard !r.timedOut else {
            Issue.record("cuff \(args.joined(separator: " ")) timed out after \(timeout) s")
            return CLIResult(status: -1, stdout: "", stderr: "")
        }
        return CLIResult(status: r.status, stdout: r.stdout, stderr: r.stderr)
    }

    static func json(_ line: String) throws -> [String: Any] {
        let obj = try JSONSerialization.jsonObject(with: Data(line.utf8))
        return try #require(obj as? [String: Any])
    }
}

/// `cuff simulate --cuffs N --every 60 --speed 60 --quiet` serving `DIR/cuffs` of a scratch
/// directory (its stderr in `sim.err` there): a fleet the watch tests follow, each cuff measuring
/// once a second of real time.
enum SimulatedFleet {
    /// Starts the fleet and waits (at most 10 s, else the test fails) for its last cuff's socket.
    static func start(in s: ScratchDirectory, cuffs: Int, sourceLocation: SourceLocation = #_sourceLocation) throws
        -> ChildProcess
    {
        let fleet = try ChildProcess(
            [
                "simulate", "--listen", "unix:" + s.path("cuffs"), "--cuffs", "\(cuffs)", "--every", "60", "--speed",
                "60",
                "--quiet",
            ],
            stderr: s.path("sim.err"))
        let last = s.path("cuffs/cuff-" + String(format: "%04d", cuffs) + ".sock")
        #expect(waitUntil(10) { FileManager.default.fileExists(atPath: last) }, sourceLocation: sourceLocation)
        return fleet
    }
}
