// SPDX-License-Identifier: GPL-2.0-or-later
import CuffLogging
import CuffRuntime
import Dispatch
import Logging
import Synchronization
import Transport

/// A simulated cuff serving clients on a Unix SEQPACKET socket, as `cuff simulate --listen
/// unix:PATH` does: one ATT PDU per packet, one client at a time, the next waiting in the listen
/// queue.
///
/// ```swift
/// let server = SimulatedCuffServer(CuffSimulation(scenario: .normal), path: "/tmp/cuff.sock", speed: 50)
/// try server.start()
/// defer { server.stop() }
/// // connect your client to /tmp/cuff.sock (or `cuff measure --connect unix:/tmp/cuff.sock`)
/// ```
///
/// The runtime's ``PeripheralDriver`` and ``ListeningPeripheral`` serve the cuff on an event loop
/// of their own thread, from ``start()`` to ``stop()``. Its clock runs `speed` times faster than
/// real time. Process signals are left alone: ``pressButton()`` is the button.
public final class SimulatedCuffServer: Sendable {
    /// The socket's path.
    public let path: String
    /// Which cuff it serves.
    public let simulation: CuffSimulation
    /// How many times faster than real time the cuff's clock runs.
    public let speed: Double
    let logger: Logger
    /// What the caller's thread and the server's share; the server's thread holds this, not the
    /// server, so a server that goes away stops (``deinit``).
    let control = Control()

    final class Control: Sendable {
        let state = Mutex(State())
    }

    struct State {
        var thread: OSThread?
        var stopRequested = false
        var buttonPresses = 0
        var sessions = 0
        /// Why the thread could not start serving, once it has tried.
        var startFailure: String?
    }

    /// Prepares a server; nothing listens before ``start()``.
    ///
    /// - Parameters:
    ///   - simulation: which cuff to be.
    ///   - path: where to listen (a path for a Unix socket; it must not be in use).
    ///   - speed: how many times faster than real time the cuff runs (above 0; `cuff simulate`'s
    ///     default is 10).
    ///   - log: gets the cuff's and the sessions' log lines (what `cuff simulate` prints on stderr),
    ///     on the server's thread; by default they are dropped.
    public init(
        _ simulation: CuffSimulation, path: String, speed: Double = 10,
        log: Logger = .silent
    ) {
        precondition(speed > 0 && speed.isFinite, "speed must be a finite number above 0")
        self.simulation = simulation
        self.path = path
        self.speed = speed
        logger = log
    }

    /// Stops the server (``stop()``) when nobody holds it any more.
    deinit { stop() }

    /// Listens at ``path`` and serves clients on a thread of its own until ``stop()``.
    ///
    /// When it returns, the socket accepts connections.
    ///
    /// - Throws: ``CuffTestingError``: ``CuffTestingError/Code/cannotListen`` (the path is in use,
    ///   too long, not writable), ``CuffTestingError/Code/noSimulatedCuff``,
    ///   ``CuffTestingError/Code/cannotStart`` (no event loop or thread),
    ///   ``CuffTestingError/Code/alreadyStarted``.
    public func start() throws(CuffTestingError) {
        let control = control
        guard control.state.withLock({ $0.thread == nil }) else {
            throw CuffTestingError(.alreadyStarted, "the simulated cuff at \(path) is already serving")
        }
        // The cuff's clock runs `speed` times faster; its ATT transaction timeout stays the
        // client's 30 real seconds (as `cuff simulate --speed` has it).
        var simulation = simulation
        simulation.configuration.timeScale = speed
        let peripheral = try simulation.makePeripheral()
        let listener: UnixSeqpacketListener
        do {
            listener = try UnixSeqpacketListener(path: path)
        } catch {
            throw CuffTestingError(.cannotListen, "cannot listen at \(path): \(error.message)")
        }
        // The loop is made on the thread that runs it; the thread says whether that worked.
        let started = DispatchSemaphore(value: 0)
        control.state.withLock {
            $0.stopRequested = false
            $0.startFailure = nil
        }
        let (speed, log) = (speed, logger)
        let thread = OSThread.start {
            Self.serve(peripheral, listener: listener, control: control, speed: speed, log: log) { problem in
                control.state.withLock { $0.startFailure = problem }
                started.signal()
            }
        }
        guard let thread else {
            listener.close()
            throw CuffTestingError(.cannotStart, "cannot start a thread for the simulated cuff at \(path)")
        }
        started.wait()
        if let problem = control.state.withLock({ $0.startFailure }) {
            thread.join()
            throw CuffTestingError(.cannotStart, "cannot start the simulated cuff at \(path): \(problem)")
        }
        control.state.withLock { $0.thread = thread }
    }

    /// Ends the connection (if any), stops listening, removes the socket and waits for the
    /// server's thread. Does nothing when the server is not running.
    public func stop() {
        let thread = control.state.withLock { s -> OSThread? in
            s.stopRequested = true
            defer { s.thread = nil }
            return s.thread
        }
        thread?.join()
    }

    /// Presses the cuff's button (what SIGUSR1 does to `cuff simulate`): starts a measurement.
    public func pressButton() {
        control.state.withLock { $0.buttonPresses += 1 }
    }

    /// How many clients connected so far.
    public var sessions: Int { control.state.withLock { $0.sessions } }

    /// The server's thread: the runtime's listening peripheral on an event loop, until stopped.
    static func serve<P: GATTPeripheral>(
        _ peripheral: P, listener: UnixSeqpacketListener, control: Control,
        speed: Double, log: Logger,
        started: (String?) -> Void
    ) {
        let loop: EventLoop
        do {
            loop = try EventLoop(capacity: 8)
        } catch {
            listener.close()
            return started(error.message)
        }
        // A stop request is seen within this much real time.
        loop.maxWait = .milliseconds(20)
        let clock = SimulationClock(speed: speed)
        let driver = PeripheralDriver(peripheral: peripheral, clock: clock, signals: nil, log: log)
        let cuff = ListeningPeripheral(driver: driver, listener: listener, loop: loop, log: log)
        do {
            try cuff.start()
        } catch {
            cuff.stop()
            return started(error.message)
        }
        started(nil)
        do {
            try loop.run {
                let (stop, presses) = control.state.withLock { s in
                    s.sessions = cuff.sessions
                    defer { s.buttonPresses = 0 }
                    return (s.stopRequested, s.buttonPresses)
                }
                for _ in 0..<presses { driver.pressButton() }
                return stop
            }
        } catch {
            log.info("event loop failed: \(error.message)")
        }
        cuff.stop()
        control.state.withLock { $0.sessions = cuff.sessions }
    }
}
