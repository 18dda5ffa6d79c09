// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
    import Glibc
#endif
import CuffCore
import CuffLogging
import CuffSession
import Logging
import Transport

/// `cuff watch` on Unix sockets: follows many simulated cuffs at once on one ``EventLoop``, each
/// with its own session, connecting again whenever a session ends.
///
/// A target is a socket path, or a directory whose sockets (also ones that appear later) are each a
/// target. A session that ended normally (the cuff switched off) is followed by a new connection
/// after ``Configuration/reconnectDelay``; a failed connection or a session that ended at once is
/// retried with exponential backoff, so a cuff that misbehaves costs little and stalls no other.
public final class Watcher {
    public struct Configuration {
        /// Socket paths to follow.
        public var sockets: [String] = []
        /// Directories whose sockets to follow.
        public var directories: [String] = []
        /// The session for one connection; the address is `unix:PATH`.
        public var session: (String) -> CuffSessionConfiguration = { CuffSessionConfiguration(address: $0) }
        /// How often directories are looked at again for new sockets.
        public var rescan: Duration = .seconds(1)
        /// Pause before connecting again after a session that ended normally.
        public var reconnectDelay: Duration = .milliseconds(200)
        /// First and longest pause after failures (doubling in between, with jitter).
        public var backoffMin: Duration = .milliseconds(500)
        public var backoffMax: Duration = .seconds(30)
        /// A session shorter than this without a measurement counts as a failure (backoff).
        public var minimumHealthySession: Duration = .seconds(1)
        /// The highest stored-record sequence number the store holds for an address (asked once per
        /// cuff, before its first session; later sessions use what the collector kept since).
        public var storedSequenceNumber: ((String) -> UInt16?)?
        /// After ``stop()``: how long open sessions may take to end before their links are closed.
        public var stopGrace: Duration = .seconds(5)
        /// Where what sessions learn about the cuffs on Unix sockets and raw links is kept (the GATT cache,
        /// read once per cuff and written when it changed); nil: every session discovers.
        public var gattCache: GATTCacheStore?

        public init() {}

        /// Sorts `paths` into ``directories`` (what is a directory now) and ``sockets`` (the rest:
        /// a socket, or a path where one will appear).
        public mutating func add(paths: [String]) {
            for p in paths {
                if case .success(let st) = Sys.fileStatus(p), st.st_mode & S_IFMT == S_IFDIR {
                    directories.append(p)
                } else {
                    sockets.append(p)
                }
            }
        }
    }

    final class Target {
        let path: String
        let fromDirectory: Bool
        /// A Bluetooth cuff: starts a connection the kernel completes when the cuff advertises.
        let start: (() throws(TransportError) -> any PendingConnection)?
        var name: String
        var pending: (any PendingConnection)?
        var pendingFD: CInt?
        var pendingTimer: EventLoop.TimerID?
        var waitingSaid = false
        var connection: CentralConnection?
        var retry: EventLoop.TimerID?
        var failures = 0
        var connectedAt: Timestamp = .zero
        var sessions = 0
        var lastError: String?
        /// The GATT cache's entry for this cuff, once read (``Configuration/gattCache``).
        var learned: LearnedCuff?
        init(path: String, fromDirectory: Bool) {
            self.path = path
            self.fromDirectory = fromDirectory
            start = nil
            cachesGATT = true
            name = "unix:" + path
            address = "unix:" + path
        }
        /// Whether what its sessions learn is kept in the GATT cache: a Unix socket's or a raw
        /// link's (through bluetoothd, bluetoothd keeps its own).
        let cachesGATT: Bool
        init(address: String, cachesGATT: Bool, start: @escaping () throws(TransportError) -> any PendingConnection) {
            path = address
            fromDirectory = false
            self.cachesGATT = cachesGATT
            self.start = start
            name = address
            self.address = address
        }
        let address: String
    }

    let configuration: Configuration
    /// The loop everything followed runs on (a pairing agent can be served there too).
    public let loop: EventLoop
    let collector: Collector
    /// Events and device identities (journald); never readings.
    let logger: Logger
    /// The sessions' own lines (may name values), each scoped by its cuff's address.
    let sessionLogger: Logger
    /// Records that are not measurements go straight to the collector's queue too, in order.
    var targets: [String: Target] = [:]
    var rescanTimer: EventLoop.TimerID?
    /// Paths given as sockets that turned out to be directories once they appeared (nothing was
    /// there at start: a fleet that makes its directory after `watch` started): followed as
    /// ``Configuration/directories`` are.
    var laterDirectories: [String] = []
    public private(set) var stopping = false
    var stopDeadline: Timestamp?
    var random = SeededRandom(seed: 0x5eed)

    public init(
        configuration: Configuration, loop: EventLoop, collector: Collector,
        log: Logger, sessionLog: Logger = .silent
    ) {
        self.configuration = configuration
        self.loop = loop
        self.collector = collector
        self.logger = log
        self.sessionLogger = sessionLog
    }

    func log(_ line: String) { logger.info("\(line)") }

    /// How many sessions are open now.
    public var openSessions: Int { targets.values.reduce(0) { $0 + ($1.connection == nil ? 0 : 1) } }
    /// How many cuffs are followed.
    public var targetCount: Int { targets.count }

    /// Connects to every target now; looks at the directories every ``Configuration/rescan``.
    public func start() {
        started = true
        for p in configuration.sockets { add(p, fromDirectory: false) }
        for t in targets.values where t.start != nil { connect(t) }
        rescanDirectories()
    }

    /// Stops connecting; asks every open session to end (SIGTERM). ``isDone`` turns true once all
    /// ended (at the latest after ``Configuration/stopGrace``, when their links are closed).
    public func stop() {
        guard !stopping else { return }
        stopping = true
        if let t = rescanTimer { loop.cancel(t) }
        rescanTimer = nil
        for t in targets.values {
            if let r = t.retry { loop.cancel(r) }
            t.retry = nil
            cancelPending(t)
            t.connection?.stop(reason: "stopping (cuff watch is shutting down)")
        }
        stopDeadline = MonotonicClock.now() + configuration.stopGrace
        loop.schedule(at: stopDeadline!) { [unowned self] in
            for t in self.targets.values { t.connection?.abort("cuff watch stopped") }
        }
    }

    /// Stopped, and every session has ended.
    public var isDone: Bool { stopping && openSessions == 0 }

    // MARK: Targets

    /// Follows a Bluetooth cuff (or anything reached by a non-blocking connect): `start` begins a
    /// connection attempt; an attempt that timed out (the cuff did not advertise) starts again at
    /// once, other failures back off.
    /// `cachesGATT`: keep what its sessions learn in ``Configuration/gattCache`` (a raw ATT link;
    /// not through bluetoothd, which keeps its own).
    public func follow(
        address: String, cachesGATT: Bool = false, start: @escaping () throws(TransportError) -> any PendingConnection
    ) {
        guard targets[address] == nil else { return }
        let t = Target(address: address, cachesGATT: cachesGATT, start: start)
        targets[address] = t
        log("following \(address)")
        if !stopping && started { connect(t) }
    }

    var started = false

    /// Runs `body` every `interval` on the loop until ``stop()`` (e.g. to follow cuffs bonded
    /// while watching).
    public func repeatEvery(_ interval: Duration, _ body: @escaping () -> Void) {
        loop.schedule(at: MonotonicClock.now() + interval) { [weak self] in
            guard let self, !self.stopping else { return }
            body()
            self.repeatEvery(interval, body)
        }
    }

    /// Gives up the attempt under way: unwatched, then cancelled (its descriptor closed).
    func cancelPending(_ t: Target) {
        let p = t.pending
        cancelPendingWatch(t)
        p?.cancel()
    }

    func connectPending(_ t: Target, _ start: () throws(TransportError) -> any PendingConnection) {
        do {
            let p = try start()
            guard let fd = p.fileDescriptor else { return failed(t, "connect: no descriptor") }
            try loop.watch(fd, readable: p.waitsForReadable, writable: !p.waitsForReadable) {
                [unowned self, unowned t] _ in self.pendingReady(t)
            }
            t.pending = p
            t.pendingFD = fd
            if let limit = p.attemptTimeout {
                // Not connected within the attempt's time: start it again (the cuff is not there).
                t.pendingTimer = loop.schedule(at: MonotonicClock.now() + limit) { [unowned self, unowned t] in
                    t.pendingTimer = nil
                    guard t.pending != nil else { return }
                    self.cancelPending(t)
                    self.schedule(t, after: self.configuration.reconnectDelay)
                }
            }
            if !t.waitingSaid {
                t.waitingSaid = true
                log("\(t.name): waiting for it to advertise")
            }
        } catch {
            failed(t, error.message)
        }
    }

    func pendingReady(_ t: Target) {
        guard let p = t.pending else { return }
        // A one-shot connect's descriptor becomes the bearer's (or is closed): unwatch it first.
        if !p.waitsForReadable { cancelPendingWatch(t) }
        do {
            guard let bearer = try p.advance() else { return }  // a step of a longer conversation
            cancelPendingWatch(t)
            t.waitingSaid = false
            log("\(t.name): connected")
            run(t, bearer)
        } catch {
            cancelPendingWatch(t)
            p.cancel()
            // Not advertising within the kernel's connect timeout: simply wait again.
            if let e = error.systemErrno, [Errno.timedOut, .hostIsDown, .noRouteToHost].contains(e) {
                return schedule(t, after: configuration.reconnectDelay)
            }
            failed(t, error.message)
        }
    }

    /// The attempt is over (connected or failed): stop watching it, keep the descriptor.
    func cancelPendingWatch(_ t: Target) {
        if let fd = t.pendingFD { loop.unwatch(fd) }
        t.pendingFD = nil
        t.pending = nil
        if let timer = t.pendingTimer { loop.cancel(timer) }
        t.pendingTimer = nil
    }

    func add(_ path: String, fromDirectory: Bool) {
        guard targets[path] == nil else { return }
        let t = Target(path: path, fromDirectory: fromDirectory)
        targets[path] = t
        log("following unix:\(path)")
        connect(t)
    }

    func rescanDirectories() {
        guard !stopping, !configuration.directories.isEmpty || !laterDirectories.isEmpty else { return }
        for dir in configuration.directories + laterDirectories {
            guard case .success(let names) = Sys.listDirectory(dir) else { continue }
            for name in names.sorted() {
                let path = dir.hasSuffix("/") ? dir + name : dir + "/" + name
                guard targets[path] == nil, case .success(let st) = Sys.lstat(path), st.st_mode & S_IFMT == S_IFSOCK
                else { continue }
                add(path, fromDirectory: true)
            }
        }
        rescanTimer = loop.schedule(at: MonotonicClock.now() + configuration.rescan) { [unowned self] in
            self.rescanDirectories()
        }
    }

    func connect(_ t: Target) {
        t.retry = nil
        guard !stopping, t.connection == nil, t.pending == nil else { return }
        if let start = t.start { return connectPending(t, start) }
        let bearer: UnixSeqpacketBearer
        do {
            bearer = try UnixSeqpacketBearer.connect(path: t.path, sendTimeout: .milliseconds(500))
        } catch {
            if t.fromDirectory, case .failure(.noSuchFileOrDirectory) = Sys.lstat(t.path) {
                log("unix:\(t.path) is gone; no longer followed")
                targets[t.path] = nil
                return
            }
            if !t.fromDirectory, case .success(let st) = Sys.fileStatus(t.path), st.st_mode & S_IFMT == S_IFDIR {
                // Nothing was there at start; a directory is now (probe S: its cuffs were never
                // followed, as `--connect unix:DIR` promises).
                log("unix:\(t.path) is a directory now; following the sockets in it")
                targets[t.path] = nil
                laterDirectories.append(t.path)
                if rescanTimer == nil { rescanDirectories() }
                return
            }
            return failed(t, error.message)
        }
        run(t, bearer)
    }

    /// One session on a connected link.
    func run(_ t: Target, _ bearer: any PollableBearer) {
        if t.sessions == 0, let ask = configuration.storedSequenceNumber {
            collector.learnSequenceNumber(ask(t.address), address: t.address)
        }
        t.sessions += 1
        t.connectedAt = MonotonicClock.now()
        var config = configuration.session(t.address)
        if config.lastSequenceNumber == nil {
            config.lastSequenceNumber = collector.lastSequenceNumber(address: t.address)
        }
        if let store = gattCache(t) {
            if t.sessions == 1 { t.learned = store.load(address: t.address, log: logger) }
            config.gattCache = .on(t.learned)
        }
        let hooks = SessionHooks(emit: { _ in }, log: sessionLogger.scoped(t.address))
        let c = CentralConnection(configuration: config, bearer: bearer, loop: loop, hooks: hooks, committer: collector)
        c.onFinish = { [unowned self, unowned t] c in self.ended(t, c) }
        t.connection = c
        c.start()
    }

    /// The GATT cache for `t`: Unix-socket cuffs and raw Bluetooth links (bluetoothd keeps its own).
    func gattCache(_ t: Target) -> GATTCacheStore? { t.cachesGATT ? configuration.gattCache : nil }

    func ended(_ t: Target, _ c: CentralConnection) {
        t.connection = nil
        if let store = gattCache(t) {
            t.learned = store.keep(c.central, before: t.learned, address: t.address, log: logger)
        }
        let lasted = MonotonicClock.now() - t.connectedAt
        // What was kept, not what arrived: a reading the store could not keep is not counted.
        let measured = c.keptMeasurements
        // The store's error is told once by the collector; the session only says it ended on it.
        let why = c.sinkFailure != nil ? "a reading could not be kept" : "\(c.outcome.rawValue)"
        log("\(t.name): session \(t.sessions) ended (\(why); \(measured) new measurement\(measured == 1 ? "" : "s"))")
        guard !stopping else { return }
        let arrived = c.arrivedMeasurements
        if c.sinkFailure != nil || (arrived == 0 && lasted < configuration.minimumHealthySession) {
            return failed(t, why)
        }
        t.failures = 0
        t.lastError = nil
        schedule(t, after: configuration.reconnectDelay)
    }

    func failed(_ t: Target, _ why: String) {
        t.failures += 1
        let exponent = min(t.failures - 1, 16)
        var delay = configuration.backoffMin * (1 << exponent)
        if delay > configuration.backoffMax { delay = configuration.backoffMax }
        // ±20 % jitter, so that many cuffs failing together do not retry together.
        delay = delay * (0.8 + 0.4 * Double.random(in: 0..<1, using: &random))
        if why != t.lastError || t.failures == 1 {
            log("\(t.name): \(why); retrying in \(String(format1(delay.secondsDouble))) s")
        }
        t.lastError = why
        schedule(t, after: delay)
    }

    func schedule(_ t: Target, after delay: Duration) {
        t.retry = loop.schedule(at: MonotonicClock.now() + delay) { [unowned self, unowned t] in self.connect(t) }
    }
}

func format1(_ x: Double) -> String { String((x * 10).rounded() / 10) }
