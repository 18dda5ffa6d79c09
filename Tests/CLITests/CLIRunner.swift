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
