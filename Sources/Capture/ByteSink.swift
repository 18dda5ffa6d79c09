// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Transport

#if canImport(Glibc)
    import Glibc
#endif

/// Where a capture writer puts its bytes.
public protocol ByteSink: Sendable {
    /// Writes all of `bytes`.
    ///
    /// - Throws: ``CaptureError`` `io_error` when the underlying write fails.
    mutating func write(_ bytes: ArraySlice<UInt8>) throws(CaptureError)
}

/// A sink collecting bytes in memory.
public struct ArrayByteSink: ByteSink {
    public var bytes: [UInt8] = []
    public init() {}
    public mutating func write(_ bytes: ArraySlice<UInt8>) throws(CaptureError) { self.bytes.append(contentsOf: bytes) }
}

/// A sink writing to a file (created or truncated); the descriptor closes when the last copy goes.
public final class FileByteSink: ByteSink {
    public let path: String
    private let fd: Int32

    /// Creates or truncates `path` with mode 0644. The corresponding C function is `open`.
    public init(path: String) throws(CaptureError) {
        self.path = path
        switch Sys.open(path, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o644) {
        case .success(let fd): self.fd = fd
        case .failure(let e): throw CaptureError(.ioError, "cannot create \(path): \(e)", errno: e.rawValue)
        }
    }

    deinit { _ = Sys.close(fd) }

    /// Writes all bytes, retrying short writes and EINTR. The corresponding C function is `write`.
    public func write(_ bytes: ArraySlice<UInt8>) throws(CaptureError) {
        if let e = bytes.withUnsafeBytes({ Sys.writeAll(fd, $0).error }) {
            throw CaptureError(.ioError, "write to \(path) failed: \(e)", errno: e.rawValue)
        }
    }
}

/// Writes btsnoop v1 files: the header, then one record per ``HCIRecord``.
///
/// Records are buffered and handed to the sink in chunks of about 64 KiB; call ``flush()`` (or
/// ``finish()``) before reading the sink.
public struct BTSnoopWriter<Sink: ByteSink>: Sendable {
    public private(set) var sink: Sink
    public let datalink: BTSnoopDatalink
    private var pending = ByteWriter(capacity: 64 * 1024 + 1024)
    private let flushThreshold = 64 * 1024

    /// Starts a file of `datalink` (1001, 1002 or 2001) on `sink`, writing the 16-byte header.
    public init(sink: Sink, datalink: BTSnoopDatalink) {
        self.sink = sink
        self.datalink = datalink
        pending.write(contentsOf: BTSnoop.magic)
        pending.writeBigEndian(UInt32(1))
        pending.writeBigEndian(datalink.rawValue)
    }

    /// Appends one record.
    ///
    /// - Throws: `unsupported_record` when the datalink cannot carry the record's kind (a monitor
    ///   record in an H4 file), `oversize_record` past ``HCIRecord/maximumPayloadLength``, `io_error`.
    public mutating func write(_ record: HCIRecord) throws(CaptureError) {
        guard record.payload.count <= HCIRecord.maximumPayloadLength else {
            throw CaptureError(
                .oversizeRecord,
                "a \(record.payload.count)-byte payload is longer than \(HCIRecord.maximumPayloadLength)")
        }
        try BTSnoop.encode(record, datalink: datalink, into: &pending)
        if pending.bytes.count >= flushThreshold { try flush() }
    }

    /// Appends records in order.
    public mutating func write(contentsOf records: [HCIRecord]) throws(CaptureError) {
        for r in records { try write(r) }
    }

    /// Hands every buffered byte to the sink.
    public mutating func flush() throws(CaptureError) {
        guard !pending.bytes.isEmpty else { return }
        try sink.write(pending.bytes[...])
        pending.bytes.removeAll(keepingCapacity: true)
    }

    /// Flushes and returns the sink (for ``ArrayByteSink``: the file's bytes).
    public consuming func finish() throws(CaptureError) -> Sink {
        try flush()
        return sink
    }
}

extension BTSnoopWriter where Sink == FileByteSink {
    /// Creates (or truncates) the file at `path`.
    public init(path: String, datalink: BTSnoopDatalink) throws(CaptureError) {
        self.init(sink: try FileByteSink(path: path), datalink: datalink)
    }
}
