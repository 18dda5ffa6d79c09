// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation

/// State guarded by a lock, with waiting: a thread can sleep until the state satisfies a
/// condition, and a thread that changes the state wakes the sleepers.
///
/// Built on Foundation's `NSCondition` (a heap object, so the lock never moves: no `&mutex` on a
/// stored property), which ThreadSanitizer follows: `Synchronization.Mutex` waits on a futex that
/// TSan cannot see, so it reports the accesses such a lock guards as races. A waiter checks its
/// condition again after every wake-up.
///
/// For the few hand-overs between threads that cannot use an event loop (the replay's reader,
/// workers and writer); not for hot per-item locking.
final class ConditionLock<State>: @unchecked Sendable {
    private let condition = NSCondition()
    private var state: State

    init(_ state: State) {
        self.state = state
    }

    /// Runs `body` with the lock held; with `wakingWaiters`, then wakes every waiting thread (each
    /// checks its condition again).
    func withLock<R>(wakingWaiters: Bool = false, _ body: (inout State) throws -> R) rethrows -> R {
        condition.lock()
        defer {
            if wakingWaiters { condition.broadcast() }
            condition.unlock()
        }
        return try body(&state)
    }

    /// Waits until `ready` holds, then runs `body` with the lock held (the condition still true);
    /// with `wakingWaiters`, then wakes every waiting thread.
    func wait<R>(until ready: (State) -> Bool, wakingWaiters: Bool = false, then body: (inout State) throws -> R)
        rethrows -> R
    {
        condition.lock()
        defer {
            if wakingWaiters { condition.broadcast() }
            condition.unlock()
        }
        while !ready(state) { condition.wait() }
        return try body(&state)
    }
}
