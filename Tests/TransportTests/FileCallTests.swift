// SPDX-License-Identifier: GPL-2.0-or-later
//
// The file calls `Sys` makes through swift-system (open, read, write, seek, stat, dup2, pipe,
// close), against real files and pipes: results and errno codes as the C calls give them.

import CuffCore
import CuffTestSupport
import Glibc
import Testing

@testable import Transport

@Suite("File calls through swift-system")
struct FileCallTests {
    /// Reads what is there now (at most `max` bytes) from `fd`.
    static func read(_ fd: CInt, max: Int = 64) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: max)
        let n = try buffer.withUnsafeMutableBytes { try Sys.read(fd, into: $0).get() }
        return Array(buffer[0..<n])
    }

    @Test func writeThenReadThroughAPipe() throws {
        let (r, w) = try Sys.pipe().get()
        // Close-on-exec, so a child another test spawns meanwhile cannot hold the write end open.
        #expect(fcntl(r, F_GETFD) & FD_CLOEXEC != 0 && fcntl(w, F_GETFD) & FD_CLOEXEC != 0)
        #expect(Sys.writeAll(w, "one line\n") == nil)
        #expect(try Self.read(r) == Array("one line\n".utf8))
        try Sys.close(w).get()
        #expect(try Self.read(r).isEmpty)  // the end of the file once the write end is closed
        try Sys.close(r).get()
        // (A descriptor number no test can hold: closing one that is gone.)
        #expect(Sys.close(-1).map { _ in 0 } == .failure(.badFileDescriptor))
        // Writing to a pipe nobody reads: EPIPE, as a code (SIGPIPE ignored, as cuff does).
        Sys.ignore(signal: SIGPIPE)
        let (r2, w2) = try Sys.pipe().get()
        _ = Sys.close(r2)
        #expect(Sys.writeAll(w2, "x") == .brokenPipe)
        _ = Sys.close(w2)
    }

    @Test func missingPathsGiveENOENT() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let missing = dir.path("no/such/file")
        #expect(Sys.open(missing, O_RDONLY) == .failure(.noSuchFileOrDirectory))
        #expect(Sys.fileStatus(missing).map { _ in 0 } == .failure(.noSuchFileOrDirectory))
        #expect(Sys.lstat(missing).map { _ in 0 } == .failure(.noSuchFileOrDirectory))
        #expect(Sys.readFile(missing) == .failure(.noSuchFileOrDirectory))
        // Matched by a pattern, as callers do (swift-system's own Errno pattern must not take it).
        guard case .failure(.noSuchFileOrDirectory) = Sys.lstat(missing) else {
            Issue.record("ENOENT did not match its pattern")
            return
        }
        // O_EXCL on a file that is there: EEXIST.
        let file = dir.path("f")
        let fd = try Sys.open(file, O_WRONLY | O_CREAT | O_EXCL, mode: 0o600).get()
        _ = Sys.close(fd)
        #expect(Sys.open(file, O_WRONLY | O_CREAT | O_EXCL, mode: 0o600) == .failure(.fileExists))
    }

    /// A state file that is not a regular file is refused at once: a FIFO nobody writes to (a
    /// blocking `open` would wait forever), a directory, a character device. A regular file
    /// reads as before.
    @Test func aRegularFileOnlyReadNeverWaitsOnAFIFO() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let fifo = dir.path("fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(Sys.readFile(fifo, regularFileOnly: true) == .failure(.invalidArgument))
        #expect(Sys.readFile(dir.root, regularFileOnly: true) == .failure(.invalidArgument))
        #expect(Sys.readFile("/dev/zero", limit: 8, regularFileOnly: true) == .failure(.invalidArgument))
        #expect(Sys.readFile(dir.path("none"), regularFileOnly: true) == .failure(.noSuchFileOrDirectory))
        let file = dir.path("f")
        let fd = try Sys.open(file, O_WRONLY | O_CREAT, mode: 0o600).get()
        #expect(Sys.writeAll(fd, "state\n") == nil)
        _ = Sys.close(fd)
        #expect(try Sys.readFile(file, regularFileOnly: true).get() == Array("state\n".utf8))
        // Without the flag the same call reads a device (what /proc and /sys callers rely on).
        #expect(try Sys.readFile("/dev/zero", limit: 8).get() == [UInt8](repeating: 0, count: 8))
    }

    @Test func openCreatesWithTheModeAndCloseOnExec() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let file = dir.path("data")
        let fd = try Sys.open(file, O_RDWR | O_CREAT | O_TRUNC, mode: 0o600).get()
        defer { _ = Sys.close(fd) }
        #expect(fcntl(fd, F_GETFD) & FD_CLOEXEC != 0)
        #expect(Sys.writeAll(fd, "0123456789") == nil)
        let st = try Sys.fstat(fd).get()
        #expect(st.st_size == 10)
        #expect(st.st_mode & S_IFMT == S_IFREG)
        #expect(st.st_mode & 0o777 == 0o600)
        try Sys.seek(fd, to: 6).get()
        #expect(try Self.read(fd) == Array("6789".utf8))
        #expect(try Sys.readFile(file, limit: 4).get() == Array("0123".utf8))
        #expect(try Sys.fileStatus(file).get().st_size == 10)
        // lstat sees the link itself, stat what it points to.
        #expect(symlink(file, dir.path("link")) == 0)
        #expect(try Sys.lstat(dir.path("link")).get().st_mode & S_IFMT == S_IFLNK)
        #expect(try Sys.fileStatus(dir.path("link")).get().st_mode & S_IFMT == S_IFREG)
    }

    @Test func reopenPutsANewFileAtTheOldNameInPlaceOfTheDescriptor() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let log = dir.path("cuff.log")
        let fd = try Sys.open(log, O_WRONLY | O_APPEND | O_CREAT, mode: 0o600).get()
        defer { _ = Sys.close(fd) }
        let output = ReopenableOutput(fd: fd)
        #expect(output.path == log)
        #expect(Sys.writeAll(fd, "before\n") == nil)
        // logrotate renames the file; the descriptor still writes to it until reopened.
        #expect(rename(log, log + ".1") == 0)
        #expect(output.reopen() == nil)
        #expect(Sys.writeAll(fd, "after\n") == nil)
        #expect(dir.text("cuff.log.1") == "before\n")
        #expect(dir.text("cuff.log") == "after\n")
        #expect(try Sys.fstat(fd).get().st_mode & 0o777 == 0o600)
        // A directory gone under it: the reopen says what failed, by its errno.
        #expect(rename(log, log + ".2") == 0)
        dir.remove()
        #expect(output.reopen() == "cannot reopen \(log): No such file or directory (ENOENT)")
    }

    @Test func aPipeHasNoPathToReopen() throws {
        let (r, w) = try Sys.pipe().get()
        defer { _ = Sys.close(r); _ = Sys.close(w) }
        let output = ReopenableOutput(fd: w)
        #expect(output.path == nil)
        #expect(output.reopen() == nil)
    }

    @Test func duplicateOfABadDescriptorIsEBADF() {
        // Numbers no test can hold (tests run in parallel in this process).
        #expect(Sys.duplicate(-1, as: 1_000_000).map { _ in 0 } == .failure(.badFileDescriptor))
    }

    #if DEBUG
        /// The EINTR policy is Sys's, not swift-system's: each attempt goes through the mock table.
        @Test func readAndWriteRetryEINTRThroughTheMockTable() throws {
            let (r, w) = try Sys.pipe().get()
            defer { _ = Sys.close(r); _ = Sys.close(w) }
            let mock = SyscallMock(["write": [.fail(.interrupted)], "read": [.fail(.interrupted)]])
            let bytes = try mock.run { () throws -> [UInt8] in
                #expect(Sys.writeAll(w, "abc") == nil)
                return try Self.read(r)
            }
            #expect(bytes == Array("abc".utf8))
            #expect(mock.names == ["write", "write", "read", "read"])

            let failing = SyscallMock(["open": [.fail(.tooManyOpenFiles)]])
            #expect(failing.run { Sys.open("/dev/null", O_RDONLY) } == .failure(.tooManyOpenFiles))
        }
    #endif
}
