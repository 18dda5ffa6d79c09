// SPDX-License-Identifier: GPL-2.0-or-later
import Synchronization

/// A socket's descriptor behind a lock, -1 once closed: what every socket wrapper here keeps, so
/// that a close from one thread and a call from another never use a descriptor number twice.
extension Mutex where Value == CInt {
    /// The descriptor while it is open.
    package var openDescriptor: CInt? { withLock { $0 >= 0 ? $0 : nil } }

    /// Takes the descriptor out (leaving -1) for the caller to close; nil when it was already
    /// taken, so however many threads close, the descriptor is closed once.
    package func takeDescriptor() -> CInt? {
        withLock { fd in
            let old = fd
            fd = -1
            return old >= 0 ? old : nil
        }
    }
}
