// SPDX-License-Identifier: GPL-2.0-or-later
import Capture
import CuffCore
import CuffTestSupport
import Foundation
import Testing

/// `FileByteSource.read(into:maxCount:)` reads into the array's own spare capacity when it has
/// room for the whole read, and through its scratch buffer otherwise: either way the array ends
/// with the file's bytes after what it held, copies of it are left alone, and the end of the
/// file and a failed read are what they were.
@Suite struct FileByteSourceTests {
    /// 300,000 bytes that differ from one offset to the next (a misplaced chunk shows).
    static let content: [UInt8] = {
        var g = SeededRandom(seed: 0xB17E_5005)
        return (0..<300_000).map { _ in UInt8(truncatingIfNeeded: g.next()) }
    }()

    static func file() throws -> (ScratchDirectory, String) {
        let dir = try ScratchDirectory(prefix: "cuff-bytesource")
        let path = dir.path("f.bin")
        try Data(content).write(to: URL(fileURLWithPath: path))
        return (dir, path)
    }

    /// Reads the whole file with `prepare` run on the array before each read; the bytes after `prefix`.
    static func readAll(
        _ path: String, prefix: [UInt8] = [], maxCount: Int, prepare: (inout [UInt8]) -> Void = { _ in }
    ) throws -> [UInt8] {
        let source = try FileByteSource(path: path)
        var buffer = prefix
        while true {
            prepare(&buffer)
            let before = buffer.count
            let n = try source.read(into: &buffer, maxCount: maxCount)
            #expect(buffer.count == before + n)
            #expect(n <= maxCount && n <= 64 << 10)
            if n == 0 { break }
        }
        #expect(try source.read(into: &buffer, maxCount: maxCount) == 0)  // the end stays the end
        #expect(Array(buffer.prefix(prefix.count)) == prefix)
        return Array(buffer.dropFirst(prefix.count))
    }

    @Test(arguments: [1, 7, 4096, 65_536, 65_537, 1 << 20])
    func everyWayIntoTheArrayGivesTheFile(maxCount: Int) throws {
        let (dir, path) = try Self.file()
        defer { dir.remove() }
        // No room: through the scratch buffer.
        #expect(try Self.readAll(path, maxCount: maxCount) == Self.content)
        // Room for every read: in place.
        #expect(
            try Self.readAll(path, prefix: [1, 2, 3], maxCount: maxCount) { b in
                b.reserveCapacity(b.count + Swift.min(maxCount, 64 << 10) + 5)
            } == Self.content)
        // Room for exactly the read.
        #expect(
            try Self.readAll(path, maxCount: maxCount) { b in
                b.reserveCapacity(b.count + Swift.min(maxCount, 64 << 10))
            } == Self.content)
        // Some room, not enough: through the scratch buffer.
        if maxCount >= 4096 {
            let n = Swift.min(maxCount, 64 << 10)
            #expect(
                try Self.readAll(path, maxCount: maxCount) { b in
                    guard b.capacity - b.count >= n else { return }
                    var less: [UInt8] = []
                    less.reserveCapacity(b.count + n / 2)
                    less += b
                    b = less
                } == Self.content)
        }
    }

    /// An array that shares its storage with a copy, with room: the copy keeps its bytes.
    @Test func aCopyOfTheArrayIsLeftAlone() throws {
        let (dir, path) = try Self.file()
        defer { dir.remove() }
        let source = try FileByteSource(path: path)
        var buffer: [UInt8] = [9, 8, 7]
        buffer.reserveCapacity(1 << 17)
        let copy = buffer
        #expect(try source.read(into: &buffer, maxCount: 1000) == 1000)
        #expect(copy == [9, 8, 7])
        #expect(buffer == [9, 8, 7] + Self.content.prefix(1000))
        var copies: [[UInt8]] = []
        for _ in 0..<5 {
            copies.append(buffer)
            let before = buffer
            let n = try source.read(into: &buffer, maxCount: 70_000)
            #expect(n > 0 && copies.last == before)
        }
        #expect(Array(buffer.dropFirst(3)) == Array(Self.content.prefix(buffer.count - 3)))
    }

    /// A read that fails (a directory) is an io_error naming the path, both ways, and appends nothing.
    @Test func aFailedReadIsAnIOErrorAndAppendsNothing() throws {
        let dir = try ScratchDirectory(prefix: "cuff-bytesource")
        defer { dir.remove() }
        let source = try FileByteSource(path: dir.root)
        for room in [0, 1 << 17] {
            var buffer: [UInt8] = [5]
            buffer.reserveCapacity(room)
            #expect {
                _ = try source.read(into: &buffer, maxCount: 4096)
            } throws: { e in
                (e as? CaptureError)?.code == .ioError && "\(e)".contains(dir.root)
            }
            #expect(buffer == [5])
        }
    }
}
