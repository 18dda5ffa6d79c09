// SPDX-License-Identifier: GPL-2.0-or-later
import CuffSession
import Sinks
import Transport

/// `cuff replay`'s NDJSON on stdout: the same bytes as ``NDJSONSink`` (`SessionOutput.json`,
/// serialised, one per line), buffered in 64 KiB writes instead of one write per record (a replay
/// has no cuff waiting for a confirmation). `flushEachRecord` (for `--realtime`) delivers every line at once.
public final class ReplayNDJSONSink: SampleSink, @unchecked Sendable {
    let fd: Int32
    let flushEachRecord: Bool
    let lines = NDJSONLineBuffer()

    public init(fd: Int32 = 1, flushEachRecord: Bool) {
        self.fd = fd
        self.flushEachRecord = flushEachRecord
    }

    public func write(_ o: SessionOutput) throws(SinkError) {
        lines.append(o)
        if flushEachRecord || lines.byteCount >= 64 * 1024 { try drain() }
    }

    /// ``write(_:)`` for a progress record (most of a replay's lines), written in one go.
    @inline(__always) func write(progress p: ProgressRecord) throws(SinkError) {
        if lines.append(progress: p) >= 64 * 1024 || flushEachRecord { try drain() }
    }

    public func finish() throws(SinkError) { try drain() }

    func drain() throws(SinkError) {
        defer { lines.removeAll() }
        try writeAll(lines.bytes)
    }

    /// Writes NDJSON bytes as they are (after anything buffered).
    func write(serialized bytes: UnsafeRawBufferPointer) throws(SinkError) {
        if lines.byteCount > 0 { try drain() }
        try writeAll(bytes)
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer) throws(SinkError) {
        if let e = Sys.writeAll(fd, bytes).error {
            throw SinkError.writeFailed(destination: fd == 1 ? "stdout" : "fd \(fd)", errno: e.rawValue)
        }
    }
}
