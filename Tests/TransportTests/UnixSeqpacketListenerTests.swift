// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffTestSupport
import Glibc
import Testing
import Transport

@Suite("UnixSeqpacketListener")
struct UnixSeqpacketListenerTests {
    @Test func connectAcceptAndExchangeOverAPath() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("cuff.sock")
        let listener = try UnixSeqpacketListener(path: path)
        let client = try UnixSeqpacketBearer.connect(path: path)
        defer { client.close() }
        let server = try #require(try listener.accept(timeout: .seconds(5)))
        defer { server.close() }
        #expect(client.peerDescription == "unix:\(path)")
        try client.send([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28])
        #expect(try server.next(timeout: .seconds(5)) == .pdu([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28]))
        try server.send([0x01, 0x10, 0x01, 0x00, 0x0A])
        #expect(try client.next(timeout: .seconds(5)) == .pdu([0x01, 0x10, 0x01, 0x00, 0x0A]))
        listener.close()
        #expect(access(path, F_OK) != 0, "close() removes the socket path")
        #expect(#expect(throws: TransportError.self) { _ = try listener.accept(timeout: .zero) }?.code == .notConnected)
    }

    @Test func acceptTimesOutWithNil() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let listener = try UnixSeqpacketListener(path: dir.path("s"))
        defer { listener.close() }
        #expect(try listener.accept(timeout: .milliseconds(10)) == nil)
    }

    @Test func connectWithNobodyListeningSaysHowToStartTheSimulator() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("absent.sock")
        let error = #expect(throws: TransportError.self) { _ = try UnixSeqpacketBearer.connect(path: path) }
        #expect(error?.errno == ENOENT)
        #expect(
            error?.message
                == "connect(unix:\(path)): No such file or directory (ENOENT) — no simulator listening at \(path) — start `cuff simulate --listen unix:\(path)`"
        )
    }

    @Test func staleSocketIsReplacedAndConnectToItIsRefused() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("stale.sock")
        try makeStaleSocket(at: path)
        let error = #expect(throws: TransportError.self) { _ = try UnixSeqpacketBearer.connect(path: path) }
        #expect(error?.errno == ECONNREFUSED)
        #expect(error?.message.contains("stale socket") == true)
        let listener = try UnixSeqpacketListener(path: path)
        defer { listener.close() }
        let client = try UnixSeqpacketBearer.connect(path: path)
        client.close()
    }

    @Test func liveListenerIsNotStolen() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("live.sock")
        let first = try UnixSeqpacketListener(path: path)
        defer { first.close() }
        let error = #expect(throws: TransportError.self) { _ = try UnixSeqpacketListener(path: path) }
        #expect(error?.errno == EADDRINUSE)
        #expect(error?.message.contains("another simulator is already listening") == true)
    }

    @Test func regularFileIsNotDeleted() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("notes.txt")
        let fd = open(path, O_CREAT | O_WRONLY, 0o600)
        #expect(fd >= 0)
        close(fd)
        let error = #expect(throws: TransportError.self) { _ = try UnixSeqpacketListener(path: path) }
        #expect(error?.message.contains("is not a socket") == true)
        #expect(access(path, F_OK) == 0)
    }

    @Test func pathTooLongIsRefusedBeforeAnySyscall() throws {
        let path = "/tmp/" + String(repeating: "x", count: 200)
        let error = #expect(throws: TransportError.self) { _ = try UnixSeqpacketBearer.connect(path: path) }
        #expect(error?.message.contains("Unix sockets allow 107") == true)
    }

    @Test func listenerInMissingDirectoryExplains() throws {
        let error = #expect(throws: TransportError.self) {
            _ = try UnixSeqpacketListener(path: "/nonexistent-cuff-dir/s.sock")
        }
        #expect(error?.errno == ENOENT)
        #expect(error?.message.contains("does not exist") == true)
    }

    /// Binds a socket at `path` and closes it without unlinking, as a crashed simulator leaves it.
    private func makeStaleSocket(at path: String) throws {
        let fd = socket(AF_UNIX, CInt(SOCK_SEQPACKET.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        try #require(r == 0)
    }
}
