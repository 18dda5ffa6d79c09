// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import CuffLogging
import Logging
import Sinks
import Synchronization
import Transport

#if canImport(Glibc)
    import Glibc
#endif

/// stdout carries data only (one JSON object per line); everything for humans goes to stderr.
///
/// Every write to stdout is checked. A failed one is a failed sink: said on stderr, exit status 10
/// (``sinkFailed(_:_:)``). A reader that went away (EPIPE: `cuff replay BIG | head -1`) is not an
/// error worth a message: cuff stops quietly, says nothing more on stderr, and exits with
/// ``ExitStatus/readerGone``, the status a shell shows for a program ended by SIGPIPE.
public enum Console {
    /// stdout, buffered here and written with `write(2)` (nothing goes through C stdio).
    private static let standardOutput = FileDescriptorOutput(fd: 1, name: "stdout")
    /// Buffered bytes above which ``line(_:)`` writes them out.
    private static let flushThreshold = 64 * 1024
    private static let pending = Atomic<Int>(0)

    /// One line of data on stdout (buffered; written by ``flush()`` or when the buffer is large).
    public static func line(_ s: String) throws(SinkError) {
        try standardOutput.writeLine(s)
        if pending.add(s.utf8.count + 1, ordering: .relaxed).newValue >= flushThreshold { try flush() }
    }

    /// Lines of data on stdout, then written out; a failure is a failed sink of `command`.
    public static func print(_ lines: [String], command: String) throws(ExitStatus) {
        do {
            for l in lines { try line(l) }
            try flush()
        } catch {
            throw sinkFailed(command, error)
        }
    }

    /// Writes what ``line(_:)`` buffered.
    public static func flush() throws(SinkError) {
        pending.store(0, ordering: .relaxed)
        do { try standardOutput.flush() } catch { noteFailure(error); throw error }
    }

    /// Remembers that stdout's reader went away when `error` says so (stderr then stays quiet).
    public static func noteFailure(_ error: any Error) {
        if let e = error as? SinkError, e.isBrokenPipe { StandardError.readerWentAway() }
    }

    /// Whether stdout's reader went away (stderr then stays quiet).
    public static var readerHasGone: Bool { StandardError.readerHasGone }

    /// The exit status for a sink failure already seen (and said, unless the reader went away).
    public static var sinkFailureStatus: ExitStatus { readerHasGone ? .readerGone : .sinkFailed }

    /// Reports a failed sink as `command: error` on stderr (nothing when stdout's reader went away)
    /// and returns the exit status to end with.
    public static func sinkFailed(_ command: String, _ error: any Error) -> ExitStatus {
        noteFailure(error)
        log("\(command): \(error)")
        return sinkFailureStatus
    }

    /// One line for humans on stderr (unbuffered), its control characters escaped.
    public static func log(_ s: String) { StandardError.line(s) }

    /// The logger whose lines start `label: ` (`cuff watch: `); `quiet`: only what `--quiet` keeps
    /// (`.notice` and above: the events, `.info`, are silenced).
    public static func logger(_ label: String, quiet: Bool = false) -> Logger {
        var l = Logger(label: label)
        l.logLevel = quiet ? .notice : .info
        return l
    }

    public static var stderrIsTerminal: Bool { Sys.isTerminal(2) }
}
