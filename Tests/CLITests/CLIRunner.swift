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
    static let packageRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The cuff binary next to this test bundle (same build folder and configuration).
    static var binary: URL {
        let bundleDir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for dir in [bundleDir, bundleDir.deletingLastPathComponent(), packageRoot.appendingPathComponent(".build/debug")] {
            let candidate = dir.appendingPathComponent("cuff")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return packageRoot.appendingPathComponent(".build/debug/cuff")
    }

    @discardableResult
    static func run(_ args: [String], stdin: String? = nil, timeout: TimeInterval = 120, environment: [String: String] = [:]) throws -> CLIResult {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let outURL = dir.appendingPathComponent("out"), errURL = dir.appendingPathComponent("err"), inURL = dir.appendingPathComponent("in")
        FileManager.default.createFile(atPath: inURL.path, contents: Data((stdin ?? "").utf8))
        let p = try Spawned(args, stdin: inURL.path, stdout: outURL.path, stderr: errURL.path, environment: environment)
        guard let status = p.wait(timeout: timeout) else {
            p.signal(SIGKILL)
            _ = p.wait(timeout: 10)
            Issue.record("cuff \(args.joined(separator: " ")) timed out after \(timeout) s")
            return CLIResult(status: -1, stdout: "", stderr: "")
        }
        return CLIResult(
            status: status, stdout: try String(contentsOf: outURL, encoding: .utf8),
            stderr: try String(contentsOf: errURL, encoding: .utf8))
    }

    static func json(_ line: String) throws -> [String: Any] {
        let obj = try JSONSerialization.jsonObject(with: Data(line.utf8))
        return try #require(obj as? [String: Any])
    }
}

/// A `cuff` child process started with posix_spawn (Foundation's Process is avoided: it raced
/// when many tests spawned at once). Its stdio goes to files; the signal mask is cleared.
final class Spawned: @unchecked Sendable {
    let pid: pid_t
    private var exitStatus: Int32?

    /// - Parameter environment: variables set for the child on top of this process's environment.
    init(_ args: [String], executable: String = CLI.binary.path, stdin: String = "/dev/null", stdout: String = "/dev/null", stderr: String = "/dev/null",
         environment: [String: String] = [:]) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attr, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attr, &all)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let path = executable
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + args).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        var env = ProcessInfo.processInfo.environment
        // What a session learns about a cuff (its GATT cache) goes to the tests' own state
        // directory, not the user's home, unless a test names one.
        env["XDG_STATE_HOME"] = CLIStateDirectory.path
        for (k, v) in environment { env[k] = v }
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        let rc = posix_spawn(&child, path, &actions, &attr, argv, envp)
        guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EIO) }
        pid = child
    }

    /// The exit status (128 + signal when killed), or nil when still running after `timeout`.
    func wait(timeout: TimeInterval) -> Int32? {
        if let exitStatus { return exitStatus }
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            var status: Int32 = 0
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid {
                let code: Int32 = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
                exitStatus = code
                return code
            }
            if r < 0 && errno != EINTR { return -1 }
            usleep(2_000)
        } while Date() < deadline
        return nil
    }

    var isRunning: Bool { wait(timeout: 0) == nil }

    func signal(_ s: Int32) { kill(pid, s) }
}

/// One state directory for every `cuff` these tests start (XDG_STATE_HOME), made once per run.
enum CLIStateDirectory {
    static let path: String = {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-cli-tests-state-\(getpid())")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir.path
    }()
}
