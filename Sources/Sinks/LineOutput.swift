// SPDX-License-Identifier: GPL-2.0-or-later
import Synchronization
import Transport

#if canImport(Glibc)
    import Glibc
#endif

/// Where a text sink's lines go. Lines are buffered until ``flush()``; a sink flushes before
/// `write` returns, so a returned `write` means the bytes reached the destination (the kernel, for a
/// file descriptor).
public protocol LineOutput: AnyObject, Sendable {
    /// Appends one line; `line` has no newline (the output adds `\n`).
    func writeLine(_ line: String) throws(SinkError)
    /// Delivers every buffered line.
    func flush() throws(SinkError)
}

/// Lines to a file descriptor with `write(2)`, retried on `EINTR` and short writes.
public final class FileDescriptorOutput: LineOutput {
    public let fd: Int32
    /// Named in errors: `stdout`, `fd 5`.
    public let name: String
    /// Flush C stdio (`fflush(NULL)`) before writing, so text printed with `print` earlier comes first.
    let flushesStdio: Bool
    private let buffer = Mutex<[UInt8]>([])

    public init(fd: Int32, name: String? = nil, flushesStdio: Bool = false) {
        self.fd = fd
        self.name = name ?? "fd \(fd)"
        self.flushesStdio = flushesStdio
    }

    /// Standard output (fd 1). C stdio is flushed first so lines keep their order with `print`.
    public static func standardOutput() -> FileDescriptorOutput {
        FileDescriptorOutput(fd: 1, name: "stdout", flushesStdio: true)
    }

    public func writeLine(_ line: String) throws(SinkError) {
        buffer.withLock { b in
            b.append(contentsOf: line.utf8)
            b.append(0x0A)
        }
    }

    public func flush() throws(SinkError) {
        let fd = self.fd, name = self.name, flushesStdio = self.flushesStdio
        try buffer.withLock { (b: inout [UInt8]) throws(SinkError) in
            if flushesStdio { Sys.flushStandardIO() }
            let (written, failure) = b.withUnsafeBytes { Sys.writeAll(fd, $0) }
            b.removeFirst(written)
            if let failure { throw .writeFailed(destination: name, errno: failure.rawValue) }
        }
    }
}

/// Lines kept in memory, for tests: what was written, and what was flushed.
public final class MemoryOutput: LineOutput {
    private struct State {
        var pending: [String] = []
        var flushed: [String] = []
        var flushCount = 0
    }
    private let state = Mutex(State())

    public init() {}

    public func writeLine(_ line: String) throws(SinkError) {
        state.withLock { $0.pending.append(line) }
    }

    public func flush() throws(SinkError) {
        state.withLock { s in
            s.flushed += s.pending
            s.pending.removeAll()
            s.flushCount += 1
        }
    }

    /// Lines delivered by a flush.
    public var lines: [String] { state.withLock { $0.flushed } }
    /// Lines written but not yet flushed.
    public var pendingLines: [String] { state.withLock { $0.pending } }
    public var flushCount: Int { state.withLock { $0.flushCount } }
    /// Flushed lines joined with newlines, each terminated, as a file would hold them.
    public var text: String { lines.map { $0 + "\n" }.joined() }
}
