// SPDX-License-Identifier: GPL-2.0-or-later

import Foundation

/// A child process started with posix_spawn (Foundation's Process is avoided: it raced when many
/// tests spawned at once, and its wait hangs when the child leaves a daemon behind that inherited
/// Process's own descriptors). Its stdio goes to files; its signal mask is cleared and every signal
/// has its default action (a test runner may block SIGTERM, and a child inherits the mask). It gets
/// no other descriptor of this process: one another test's thread opened without `O_CLOEXEC` would
/// otherwise stay open in the child (holding a pipe's end open, or skewing a descriptor limit).
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    private var exitStatus: Int32?

    /// - Parameters:
    ///   - executable: a path, or a bare name looked up in `PATH`.
    ///   - stdout, stderr: files (created or truncated); the same path for both gives one file
    ///     with both streams in order.
    ///   - environment: variables set for the child on top of this process's environment.
    ///     `XDG_STATE_HOME` is ``CuffBinary/stateDirectory`` unless it names one, so what a `cuff`
    ///     a test starts learns (bonds, GATT cache) stays out of the user's home.
    public init(
        _ args: [String], executable: String = CuffBinary.path, stdin: String = "/dev/null",
        stdout: String = "/dev/null",
        stderr: String = "/dev/null", environment: [String: String] = [:]
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        if stderr == stdout {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        }
        if let closeFrom = Self.addCloseFrom { _ = closeFrom(&actions, 3) }
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
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + args).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var env = ProcessInfo.processInfo.environment
        env["XDG_STATE_HOME"] = CuffBinary.stateDirectory
        for (k, v) in environment { env[k] = v }
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var child: pid_t = 0
        let rc =
            executable.contains("/")
            ? posix_spawn(&child, executable, &actions, &attr, argv, envp)
            : posix_spawnp(&child, executable, &actions, &attr, argv, envp)
        guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EIO) }
        pid = child
    }

    /// The exit status (128 + signal when killed), or nil when still running after `timeout`
    /// seconds (nil: wait as long as it takes).
    public func wait(timeout: Double?) -> Int32? {
        if let exitStatus { return exitStatus }
        let deadline = timeout.map { Date().addingTimeInterval($0) }
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
        } while deadline.map { Date() < $0 } ?? true
        return nil
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 on; Swift's Glibc module does not
    /// declare it, as it is a GNU extension), nil where the C library lacks it.
    static let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, CInt) -> CInt)? = {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(
            symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, CInt) -> CInt).self)
    }()

    public var isRunning: Bool { wait(timeout: 0) == nil }

    public func signal(_ s: Int32) { kill(pid, s) }

    /// SIGKILL, then the status (128 + 9 unless it had ended already).
    @discardableResult
    public func kill9() -> Int32? {
        if let exitStatus { return exitStatus }
        signal(SIGKILL)
        return wait(timeout: 10)
    }
}

/// What a program run to completion did.
public struct RunResult: Sendable {
    /// The exit status (128 + signal when killed); -1 when it timed out.
    public var status: Int32
    public var stdout: String
    public var stderr: String
    /// Wall-clock seconds from spawn to exit.
    public var seconds: Double
    /// Killed after the time limit.
    public var timedOut: Bool
    public var stdoutLines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }
}

/// Runs `executable args` to completion with `stdin` as its input, its stdout and stderr captured
/// (one stream in order when `mergeStderr`); SIGKILLed after `timeout` seconds (`timedOut`; nil:
/// no limit).
public func runToCompletion(
    _ executable: String, _ args: [String], stdin: String? = nil, timeout: Double? = 120,
    environment: [String: String] = [:],
    mergeStderr: Bool = false
) throws -> RunResult {
    let dir = try ScratchDirectory(prefix: "cuff-run")
    let input = dir.path("in"), out = dir.path("out"), err = mergeStderr ? out : dir.path("err")
    FileManager.default.createFile(atPath: input, contents: Data((stdin ?? "").utf8))
    let started = ContinuousClock.now
    let child = try ChildProcess(
        args, executable: executable, stdin: input, stdout: out, stderr: err, environment: environment)
    var status = child.wait(timeout: timeout)
    let timedOut = status == nil
    if timedOut {
        child.kill9()
        status = -1
    }
    let elapsed = ContinuousClock.now - started
    return RunResult(
        status: status ?? -1, stdout: dir.text("out"), stderr: mergeStderr ? "" : dir.text("err"),
        seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, timedOut: timedOut)
}

/// The `cuff` binary of this build and the state directory every child gets.
public enum CuffBinary {
    /// The package root (this file is Tests/CuffTestSupport/ChildProcess.swift).
    public static let packageRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent()
        .deletingLastPathComponent()

    /// `CUFF_BIN` when set (another build's binary, e.g. to see tests fail on older code), else
    /// the cuff binary next to the test bundle (same build folder and configuration).
    public static var path: String {
        if let chosen = ProcessInfo.processInfo.environment["CUFF_BIN"] { return chosen }
        let bundleDir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for dir in [
            bundleDir, bundleDir.deletingLastPathComponent(), packageRoot.appendingPathComponent(".build/debug"),
        ] {
            let candidate = dir.appendingPathComponent("cuff")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate.path }
        }
        return packageRoot.appendingPathComponent(".build/debug/cuff").path
    }

    /// One state directory (XDG_STATE_HOME) for every child the tests start, made once per run and
    /// removed when the test process exits.
    public static let stateDirectory: String = {
        let dir = stateDirectoryPath()
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(atPath: CuffBinary.stateDirectoryPath()) }
        return dir
    }()

    private static func stateDirectoryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("cuff-cli-tests-state-\(getpid())").path
    }
}
