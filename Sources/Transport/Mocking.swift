// SPDX-License-Identifier: GPL-2.0-or-later
//
// Debug builds only: every `system_*` shim first asks the mock table of the current task whether
// to fail, to return a value, or to make the real call. Tests use it to reach errno paths that a
// real kernel won't produce on demand (EAFNOSUPPORT, EBUSY, ETIMEDOUT, EINTR in the middle of a
// call, …). The table is a task-local value, so tests running in parallel don't see each other's
// mocks, and calls made on other threads (a peer thread in a test) always go to the kernel.

#if ENABLE_MOCKING
    import Synchronization

    /// One system call as the mock table sees it: its C name and its integer arguments.
    package struct MockCall: Sendable, Hashable, CustomStringConvertible {
        package var name: String
        package var arguments: [Int]
        package init(_ name: String, _ arguments: [Int]) {
            self.name = name
            self.arguments = arguments
        }
        package var description: String { "\(name)(\(arguments.map(String.init).joined(separator: ", ")))" }
    }

    /// What a mocked system call does.
    package enum MockOutcome: Sendable, Hashable {
        /// Make the real call.
        case real
        /// Fail with this errno (return -1).
        case fail(Errno)
        /// Return this value without calling the kernel.
        case value(Int)
    }

    /// A table of scripted outcomes, per system call name, consumed in order.
    ///
    /// When a name's script is used up (or has none), the real call is made. Every call, scripted or
    /// not, is appended to ``trace``.
    ///
    ///     let mock = SyscallMock(["connect": [.fail(.connectionRefused)]])
    ///     let result = mock.run { try? UnixSeqpacketBearer.connect(path: "/x") }
    package final class SyscallMock: Sendable {
        @TaskLocal package static var current: SyscallMock?

        private struct State {
            var scripts: [String: [MockOutcome]]
            var trace: [MockCall] = []
        }
        private let state: Mutex<State>

        package init(_ scripts: [String: [MockOutcome]]) {
            state = Mutex(State(scripts: scripts))
        }

        /// Every call seen so far, in order.
        package var trace: [MockCall] { state.withLock { $0.trace } }

        /// The names of the calls seen so far, in order.
        package var names: [String] { trace.map(\.name) }

        /// Runs `body` with this table installed for the current task.
        package func run<R>(_ body: () throws -> R) rethrows -> R {
            try SyscallMock.$current.withValue(self) { try body() }
        }

        fileprivate func outcome(for call: MockCall) -> MockOutcome {
            state.withLock { s in
                s.trace.append(call)
                guard var script = s.scripts[call.name], !script.isEmpty else { return .real }
                let next = script.removeFirst()
                s.scripts[call.name] = script
                return next
            }
        }
    }

    /// Consults the current task's mock table: nil means "make the real call"; otherwise the value to
    /// return (with `errno` set when failing).
    @inline(never)
    package func mockedResult(_ name: String, _ arguments: [Int]) -> Int? {
        guard let mock = SyscallMock.current else { return nil }
        switch mock.outcome(for: MockCall(name, arguments)) {
        case .real: return nil
        case .fail(let e):
            Errno.current = e
            return -1
        case .value(let v): return v
        }
    }
#endif
