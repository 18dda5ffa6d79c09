// SPDX-License-Identifier: GPL-2.0-or-later

import Dispatch
import Glibc
import Synchronization

/// Runs `body` on another thread; `join` waits for it at most `limit` (nil if it didn't finish,
/// so a bug fails the test instead of hanging it).
final class Background<T: Sendable>: Sendable {
    private let result = Mutex<T?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () -> T) {
        Thread.detach { [self] in
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
    }

    func join(limit: Duration = .seconds(10)) -> T? {
        let ns = UInt64(limit.components.seconds) * 1_000_000_000
        guard done.wait(timeout: .now() + .nanoseconds(Int(ns))) == .success else { return nil }
        return result.withLock { $0 }
    }
}

enum Thread {
    static func detach(_ body: @escaping @Sendable () -> Void) {
        DispatchQueue.global().async(execute: body)
    }
}

