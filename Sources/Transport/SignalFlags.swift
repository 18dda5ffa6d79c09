// SPDX-License-Identifier: GPL-2.0-or-later

#if canImport(Glibc)
    import Glibc
#endif
import CuffCore
import Synchronization

/// Signals turned into flags a driver polls between waits.
///
/// `install` sets `sigaction` handlers **without** `SA_RESTART`, so a thread blocked in `poll`
/// wakes with EINTR (the bearers report `.timeout`), and the driver then calls
/// `consume(.int)` / `consume(.usr1)`. The handler does one atomic OR, which is
/// async-signal-safe. Only threads that don't block the signal can be interrupted: see
/// ``unblockOnCurrentThread(_:)``.
///
///     try SignalFlags.shared.install([.int, .term, .usr1])
///     while !SignalFlags.shared.isRaised(.int) { … bearer.next(timeout: …) … }
public final class SignalFlags: Sendable {
    /// The signals cuff reacts to.
    public enum Signal: CaseIterable, Sendable, CustomStringConvertible {
        /// SIGINT (Ctrl-C): stop.
        case int
        /// SIGTERM: stop.
        case term
        /// SIGUSR1: a driver-defined nudge (e.g. "press the start button").
        case usr1
        /// SIGHUP: reopen output files (`cuff watch`, after a log rotation). Not in ``standard``:
        /// elsewhere a hang-up keeps its default (end the process).
        case hup

        /// What every command reacts to: SIGINT, SIGTERM, SIGUSR1.
        public static let standard: [Signal] = [.int, .term, .usr1]

        public var number: CInt {
            switch self {
            case .int: SIGINT
            case .term: SIGTERM
            case .usr1: SIGUSR1
            case .hup: SIGHUP
            }
        }
        var bit: UInt32 { 1 << UInt32(number) }
        public var description: String {
            switch self {
            case .int: "SIGINT"
            case .term: "SIGTERM"
            case .usr1: "SIGUSR1"
            case .hup: "SIGHUP"
            }
        }
    }

    /// The process-wide flags (signal dispositions are per process).
    public static let shared = SignalFlags()

    let bits = Atomic<UInt32>(0)

    private init() {}

    /// Installs the handlers.
    ///
    /// - Throws: `TransportError` if `sigaction` fails (it doesn't for these signals).
    public func install(_ signals: [Signal] = Signal.standard) throws(TransportError) {
        _ = bits.load(ordering: .relaxed)  // make sure `shared` is initialised before any handler runs
        for signal in signals {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = cuffSignalHandler
            sigemptyset(&action.sa_mask)
            action.sa_flags = 0  // no SA_RESTART: blocked poll() returns EINTR
            if case .failure(let e) = Sys.valueOrErrno(
                retryOnInterrupt: true, { system_sigaction(signal.number, &action, nil) })
            {
                throw TransportError.system("sigaction", signal.description, e)
            }
        }
    }

    /// Unblocks `signals` on the calling thread, so that a `poll` on this thread is the one a
    /// signal interrupts.
    ///
    /// The kernel delivers a process signal to any thread that doesn't block it. Thread pools
    /// (Dispatch, Swift concurrency, the test runner) often block all signals in their workers, so
    /// a driver waiting there would never see EINTR; call this on the driver's thread (the main
    /// thread needs nothing).
    /// The corresponding C function is `pthread_sigmask`.
    public func unblockOnCurrentThread(_ signals: [Signal] = Signal.standard) throws(TransportError) {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal.number) }
        let r = system_pthread_sigmask(SIG_UNBLOCK, &set, nil)
        if r != 0 {
            throw TransportError.system("pthread_sigmask", "SIG_UNBLOCK", Errno(rawValue: r))
        }
    }

    /// ``install(_:)`` and ``unblockOnCurrentThread(_:)`` together: what a command that waits for
    /// `signals` does first (a parent may have blocked them, as test runners do; a child inherits
    /// the mask). Returns `self`.
    @discardableResult
    public func listen(_ signals: [Signal] = Signal.standard) throws(TransportError) -> SignalFlags {
        try install(signals)
        try unblockOnCurrentThread(signals)
        return self
    }

    /// Whether `signal` arrived since it was last consumed; clears it.
    public func consume(_ signal: Signal) -> Bool {
        bits.bitwiseAnd(~signal.bit, ordering: .acquiringAndReleasing).oldValue & signal.bit != 0
    }

    /// Whether `signal` arrived (and has not been consumed); leaves it set.
    public func isRaised(_ signal: Signal) -> Bool {
        bits.load(ordering: .acquiring) & signal.bit != 0
    }

    /// Sets the flag as if the signal had arrived (for drivers' own stop requests, and tests).
    public func raise(_ signal: Signal) {
        bits.bitwiseOr(signal.bit, ordering: .releasing)
    }

    fileprivate func handle(_ signo: CInt) {
        guard signo > 0 && signo < 32 else { return }
        bits.bitwiseOr(1 << UInt32(signo), ordering: .releasing)
    }
}

private func cuffSignalHandler(_ signo: CInt) {
    SignalFlags.shared.handle(signo)
}
