// SPDX-License-Identifier: GPL-2.0-or-later

import Glibc
import Testing
import Transport

@Suite("SignalFlags")
struct SignalFlagsTests {
    /// Only SIGUSR1: SIGINT/SIGTERM handlers would change how the test runner itself stops.
    @Test func realSignalSetsTheFlagUntilConsumed() throws {
        try SignalFlags.shared.install([.usr1])
        _ = SignalFlags.shared.consume(.usr1)
        #expect(SignalFlags.shared.isRaised(.usr1) == false)
        // The test runner's worker threads block signals; raise() targets this thread.
        var saved = sigset_t()
        pthread_sigmask(SIG_BLOCK, nil, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
        try SignalFlags.shared.unblockOnCurrentThread([.usr1])
        var now = sigset_t()
        pthread_sigmask(SIG_BLOCK, nil, &now)
        #expect(sigismember(&now, SIGUSR1) == 0)
        // handled on this thread before raise returns  // delivered synchronously to this thread before raise returns
        #expect(raise(SIGUSR1) == 0)
        #expect(SignalFlags.shared.isRaised(.usr1))
        #expect(SignalFlags.shared.isRaised(.int) == false)
        #expect(SignalFlags.shared.consume(.usr1))
        #expect(SignalFlags.shared.consume(.usr1) == false)
    }

    @Test func installsWithoutSARestart() throws {
        try SignalFlags.shared.install([.usr1])
        var old = sigaction()
        #expect(sigaction(SIGUSR1, nil, &old) == 0)
        #expect(old.sa_flags & CInt(SA_RESTART) == 0)
    }
}
