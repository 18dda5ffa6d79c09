// SPDX-License-Identifier: GPL-2.0-or-later
import Transport

#if canImport(Glibc)
    import Glibc
#endif

/// Where a capture reader gets its bytes: a file, an in-memory buffer, a pipe.
///
/// Readers ask for bytes in bounded chunks, so memory stays bounded whatever the file size.
public protocol ByteSource: Sendable {
    /// Appends up to `maxCount` bytes to `buffer`.
    ///
    /// - Returns: How many bytes were appended; 0 only at the end of the source.
    /// - Throws: ``CaptureError`` with code `io_error` when the underlying read fails.
    mutating func read(into buffer: inout [UInt8], maxCount: Int) throws(CaptureError) -> Int
}

/// A byte source over an array already in memory (tests, bytes received from elsewhere).
public struct ArrayByteSource: ByteSource {
    public let bytes: [UInt8]
    public private(set) var position: Int = 0

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public mutating func read(into buffer: inout [UInt8], maxCount: Int) throws(CaptureError) -> Int {
        let n = min(maxCount, bytes.count - position)
        guard n > 0 else { return 0 }
        if buffer.isEmpty && position == 0 && n == bytes.count {
            // All of it into an empty buffer: share the storage instead of copying.
            buffer = bytes
            position = n
            return n
        }
        buffer.append(contentsOf: bytes[position..<(position + n)])
        position += n
        return n
    }
}

/// A byte source reading a file through `open`/`read`; the descriptor closes when the last copy goes.
///
/// Copies share one descriptor (and so one file position): hand a source to one reader only.
public final class FileByteSource: ByteSource {
    public let path: String
    private let fd: Int32
    /// Where `read` lands before the bytes are appended: a buffer that stays in the cache, so the
    /// append is one quick copy. (Reading into the array itself needs room made first, and an
    /// array only makes room by writing it: zeroing every byte cost 4 % of a 1 GB replay.)
    /// One reader at a time (see above).
    nonisolated(unsafe) private let scratch: UnsafeMutablePointer<UInt8>
    /// The most one `read` asks for (the readers' chunk).
    static let scratchBytes = 64 << 10

    /// Opens `path` read-only.
    ///
    /// - Throws: ``CaptureError`` `io_error` naming the path and the C error. The corresponding C
    ///   function is `open`.
    public init(path: String) throws(CaptureError) {
        self.path = path
        switch Sys.open(path, O_RDONLY) {
        case .success(let fd): self.fd = fd
        case .failure(let e): throw CaptureError(.ioError, "cannot open \(path): \(e)", errno: e.rawValue)
        }
        scratch = .allocate(capacity: Self.scratchBytes)
        scratch.initialize(repeating: 0, count: Self.scratchBytes)
    }

    /// Opens `path` read-only, positioned at byte `offset` (a reader that continues mid-file).
    ///
    /// - Throws: as ``init(path:)``; `io_error` also when the position cannot be set (`lseek`).
    public convenience init(path: String, offset: Int64) throws(CaptureError) {
        try self.init(path: path)
        if case .failure(let e) = Sys.seek(fd, to: offset) {
            throw CaptureError(.ioError, "cannot seek to \(offset) in \(path): \(e)", errno: e.rawValue)
        }
    }

    deinit {
        _ = Sys.close(fd)
        scratch.deallocate()
    }

    /// Appends what one `read` gives: up to `maxCount` bytes, at most ``scratchBytes`` (fewer
    /// than asked is not the end; 0 is).
    ///
    /// Into the array's own room past its elements when it has room for them all (a reader that
    /// keeps its buffer, as the parallel replay's does): no copy. Otherwise through ``scratch``.
    public func read(into buffer: inout [UInt8], maxCount: Int) throws(CaptureError) -> Int {
        guard maxCount > 0 else { return 0 }
        let n = min(maxCount, Self.scratchBytes)
        if buffer.capacity - buffer.count >= n {
            let before = buffer.count
            var landed: Result<Int, Errno>?
            withUnsafeMutablePointer(to: &landed) { p in
                buffer.append(contentsOf: ReadIntoSpareCapacity(fd: fd, maxCount: n, landed: p))
            }
            switch landed {
            case .success?: return buffer.count - before
            case .failure(let e)?: throw failed(e)
            case nil: break  // (not read: the array had no room after all, and nothing was appended)
            }
        }
        switch Sys.read(fd, into: UnsafeMutableRawBufferPointer(start: scratch, count: n)) {
        case .success(let got):
            let got = min(max(got, 0), n)  // (a scripted read may claim more)
            buffer.append(contentsOf: UnsafeBufferPointer(start: scratch, count: got))
            return got
        case .failure(let e):
            throw failed(e)
        }
    }

    private func failed(_ e: Errno) -> CaptureError {
        CaptureError(.ioError, "read from \(path) failed: \(e)", errno: e.rawValue)
    }
}

/// One `read` straight into an array's spare capacity. `Array.append(contentsOf:)` hands a
/// sequence's `_copyContents(initializing:)` the uninitialised room past the array's elements
/// and counts what it says it wrote; this one reads into that room. (A 1 GB parallel replay
/// spent 4 % of its time copying every byte from a scratch buffer into its stretches.)
///
/// Should `append` ever fill the room some other way, it finds an empty sequence: `landed` stays
/// nil and the caller reads as before. `underestimatedCount` is 0, so a short read is no
/// "overestimate" and `append` never makes room itself.
private struct ReadIntoSpareCapacity: Sequence {
    let fd: Int32
    let maxCount: Int
    /// The read's result, once there was one.
    let landed: UnsafeMutablePointer<Result<Int, Errno>?>

    var underestimatedCount: Int { 0 }
    func makeIterator() -> EmptyCollection<UInt8>.Iterator { EmptyCollection<UInt8>.Iterator() }

    func _copyContents(initializing room: UnsafeMutableBufferPointer<UInt8>) -> (
        EmptyCollection<UInt8>.Iterator, Int
    ) {
        // No room (an array that was shared got a new buffer with none): no read, which
        // would return 0 and look like the end of the file.
        guard let base = room.baseAddress, room.count > 0 else { return (makeIterator(), 0) }
        let r = Sys.read(fd, into: UnsafeMutableRawBufferPointer(start: base, count: Swift.min(maxCount, room.count)))
        landed.pointee = r
        guard case .success(let got) = r else { return (makeIterator(), 0) }
        return (makeIterator(), Swift.min(Swift.max(got, 0), maxCount, room.count))
    }
}

/// A bounded read-ahead buffer over a ``ByteSource`` that tracks the file offset of the next byte.
///
/// The buffer only ever holds the bytes of the field being read plus one chunk, so its size is
/// bounded by the largest `take` a reader allows (readers cap lengths before asking).
struct ChunkedInput<Source: ByteSource>: Sendable {
    var source: Source
    private var buffer: [UInt8] = []
    private var position = 0
    private var atEnd = false
    /// File offset of the next unread byte.
    private(set) var offset: Int64 = 0
    let chunkSize: Int

    /// - Parameter offset: the file offset of the source's first byte (a source that starts mid-file).
    init(_ source: Source, chunkSize: Int = 64 * 1024, offset: Int64 = 0) {
        self.source = source
        self.chunkSize = chunkSize
        self.offset = offset
    }

    /// Bytes available without another read, after `fill`.
    var buffered: Int { buffer.count - position }

    /// Makes `count` bytes available if the source has them; returns how many are available.
    @discardableResult
    mutating func fill(_ count: Int) throws(CaptureError) -> Int {
        if buffered >= count || atEnd { return buffered }
        if position == buffer.count {
            // All of it consumed: emptied, not shifted. (A buffer that shares its storage with
            // the source's bytes, an ArrayByteSource's, gets new storage instead of a copy of
            // the old.)
            buffer.removeAll(keepingCapacity: true)
            position = 0
        } else if position > 0 {
            buffer.removeSubrange(0..<position)
            position = 0
        }
        while buffer.count < count && !atEnd {
            let want = max(chunkSize, count - buffer.count)
            if try source.read(into: &buffer, maxCount: want) == 0 { atEnd = true }
        }
        return buffered
    }

    /// Peeks at up to `count` bytes without consuming them.
    mutating func peek(_ count: Int) throws(CaptureError) -> ArraySlice<UInt8> {
        let n = min(try fill(count), count)
        return buffer[position..<(position + n)]
    }

    /// Consumes exactly `count` bytes, or returns nil (consuming nothing) if the source ends first.
    mutating func take(_ count: Int) throws(CaptureError) -> ArraySlice<UInt8>? {
        guard try fill(count) >= count else { return nil }
        defer { position += count; offset += Int64(count) }
        return buffer[position..<(position + count)]
    }

    /// Lends the bytes already buffered (no read) to `body`, which returns how many it consumed
    /// (0 to leave them) and a result.
    mutating func withBuffered<R>(_ body: (UnsafeRawBufferPointer) -> (consumed: Int, result: R)) -> R {
        let start = position
        let (consumed, result) = buffer.withUnsafeBytes { raw in
            body(UnsafeRawBufferPointer(rebasing: raw[start...]))
        }
        position += consumed
        offset += Int64(consumed)
        return result
    }

    /// Discards `count` bytes without buffering more than one chunk; returns false if the source ends first.
    mutating func skip(_ count: Int64) throws(CaptureError) -> Bool {
        var left = count
        while left > 0 {
            let have = try fill(Int(min(left, Int64(chunkSize))))
            if have == 0 { return false }
            let n = Int(min(Int64(have), left))
            position += n
            offset += Int64(n)
            left -= Int64(n)
        }
        return true
    }

    /// True when no byte is left.
    mutating func isAtEnd() throws(CaptureError) -> Bool { try fill(1) == 0 }
}
