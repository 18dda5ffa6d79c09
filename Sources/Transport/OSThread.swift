// SPDX-License-Identifier: GPL-2.0-or-later

#if canImport(Glibc)
    import Glibc
#endif

/// A plain POSIX thread for long-running blocking loops (a pairing agent, a driver), so they don't
/// tie up a Swift-concurrency or Dispatch worker. Signals stay blocked as the creator had them.
package final class OSThread: Sendable {
    private final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    private let handle: pthread_t

    private init(handle: pthread_t) { self.handle = handle }

    /// Starts `body` on a new thread; nil if the system refuses (no resources).
    package static func start(_ body: @escaping @Sendable () -> Void) -> OSThread? {
        let context = Unmanaged.passRetained(Box(body)).toOpaque()
        var tid = pthread_t()
        let r = pthread_create(
            &tid, nil,
            { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                box.body()
                return nil
            }, context)
        guard r == 0 else {
            Unmanaged<Box>.fromOpaque(context).release()
            return nil
        }
        return OSThread(handle: tid)
    }

    /// Waits for the thread to finish. Call once.
    package func join() {
        pthread_join(handle, nil)
    }
}
