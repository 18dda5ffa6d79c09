// SPDX-License-Identifier: GPL-2.0-or-later
import Dispatch
import Synchronization

/// State guarded by a `Synchronization.Mutex`, with waiting: a thread can sleep until the state
/// satisfies a condition, and a thread that changes the state wakes the sleepers.
///
/// The condition variable is built from the mutex and one semaphore per waiter: a waiter that
/// finds the condition false registers its semaphore while it still holds the lock, so a
/// ``withLock(wakingWaiters:_:)`` that changes the state afterwards (it takes the same lock) finds
/// it and signals it; a signal that comes before the wait is kept by the semaphore. No wake-up is
/// lost, and a waiter checks its condition again after every wake-up.
///
/// For the few hand-overs between threads that cannot use an event loop (the replay's reader,
/// workers and writer); not for hot per-item locking.
package final class ConditionLock<State: Sendable>: Sendable {
    private struct Guarded: Sendable {
        var state: State
        var waiters: [DispatchSemaphore] = []
    }

    private let guarded: Mutex<Guarded>

    package init(_ state: State) {
        guarded = Mutex(Guarded(state: state))
    }

    /// Runs `body` with the lock held; with `wakingWaiters`, then wakes every waiting thread (each
    /// checks its condition again).
    package func withLock<R: Sendable>(wakingWaiters: Bool = false, _ body: (inout State) -> R) -> R {
        guarded.withLock { g in
            let r = body(&g.state)
            if wakingWaiters { Self.wake(&g) }
            return r
        }
    }

    /// Waits until `condition` holds, then runs `body` with the lock held (the condition still
    /// true); with `wakingWaiters`, then wakes every waiting thread.
    package func wait<R: Sendable>(
        until condition: (borrowing State) -> Bool, wakingWaiters: Bool = false, then body: (inout State) -> R
    ) -> R {
        while true {
            var sleeper: DispatchSemaphore?
            let r: R? = guarded.withLock { g in
                if condition(g.state) {
                    let r = body(&g.state)
                    if wakingWaiters { Self.wake(&g) }
                    return r
                }
                let s = DispatchSemaphore(value: 0)
                g.waiters.append(s)
                sleeper = s
                return nil
            }
            if let r { return r }
            sleeper!.wait()
        }
    }

    private static func wake(_ g: inout Guarded) {
        guard !g.waiters.isEmpty else { return }
        for w in g.waiters { w.signal() }
        g.waiters.removeAll(keepingCapacity: true)
    }
}
