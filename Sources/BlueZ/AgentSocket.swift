// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Transport

/// The socket a pairing agent (``BlueZAgent``, ``PairingAgent``) answers on, served on an
/// ``EventLoop`` given to it: no thread of its own. The agent's handler runs on the loop's thread
/// whenever the socket is readable, from ``serve(_:)`` until the socket fails (``pause()``) or
/// ``stop(farewell:)``; the agent answers only while someone runs the loop.
///
/// Both agents stop the same way: stop watching, say goodbye on the socket if the agent has
/// something to say (D-Bus: `UnregisterAgent`), close. Once; later calls do nothing.
final class AgentSocket {
    /// The loop the socket is served on.
    let loop: EventLoop
    let fd: CInt
    private let closeSocket: () -> Void
    private var watched = false
    /// Whether ``stop(farewell:)`` ran (the socket is closed).
    private(set) var stopped = false
    /// Whether the handler is called (served, not failed, not stopped).
    var serving: Bool { watched }

    /// - Parameter close: closes the socket (the agent's own way: the D-Bus connection, or the fd).
    init(fd: CInt, loop: EventLoop, close: @escaping () -> Void) {
        self.fd = fd
        self.loop = loop
        closeSocket = close
    }

    /// Calls `handler` on the loop whenever the socket is readable or failed. On failure to watch
    /// the socket is closed.
    func serve(_ handler: @escaping EventLoop.Handler) throws(TransportError) {
        do {
            try loop.watch(fd, handler)
        } catch {
            stop()
            throw error
        }
        watched = true
    }

    /// The socket failed: no longer watched (a hung-up descriptor would keep the loop busy); it
    /// stays open until ``stop(farewell:)``.
    func pause() {
        guard watched else { return }
        loop.unwatch(fd)
        watched = false
    }

    /// Stops serving, runs `farewell` (best effort, e.g. a last message), closes. Idempotent.
    func stop(farewell: () -> Void = {}) {
        guard !stopped else { return }
        stopped = true
        pause()
        farewell()
        closeSocket()
    }
}
