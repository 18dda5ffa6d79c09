// SPDX-License-Identifier: GPL-2.0-or-later
import CuffSession
import Dispatch
import Foundation
import Sinks
import Synchronization
import StoreFormat

/// `--store postgres://…`: a reading is committed to the local SQLite outbox (`--outbox PATH`)
/// before ``insert(_:)`` returns, so before the session confirms it to the cuff; a shipper thread
/// then sends what the outbox holds to the server in batches, one transaction each, and removes
/// rows from the outbox only once the server has committed them. The server deduplicates by the
/// same key as the SQLite store (a unique constraint), so a batch shipped twice (a kill after the
/// commit, before the removal) or a reading shipped by several hubs is kept once.
///
/// An unreachable server does not fail a session: readings wait in the outbox, and ``finish()``
/// says on stderr how many. A server that refuses this cuff (password, database, TLS, a newer
/// schema) fails at open, before any reading is taken.
public final class PostgresOutboxStore: MeasurementStore {
    public let server: PostgresServer
    public let outbox: SQLiteStore
    public var storeName: String { server.url.description }
    public var outboxPath: String { outbox.path }
    /// This process's hold on the outbox (``OutboxLock``), dropped when it closes.
    let lock: OutboxLock
    /// What waits in outboxes passed over for this one (another database's `outbox.db`): said
    /// through `warn` at open, kept for `cuff sync` to print.
    public let notices: [String]
    let warn: SinkWarningHandler
    /// Rows per transaction when shipping.
    public let batchSize: Int
    /// Dedup keys known to be on the server (read by ``knownKeys()``, added as batches ship).
    private let serverKeys = Mutex<Set<String>>([])
    /// The last failure to ship, if the last attempt failed.
    private let failure = Mutex<PostgresStoreError?>(nil)
    /// Outbox rows that cannot be read (left there; said once).
    private let unreadable = Mutex(UnreadableOutboxRows())
    /// The server's highest sequence number per address (RACP "newer than"), read once, in one
    /// query, when the server first answers: nil until then. Never asked per cuff: `cuff watch`
    /// asks on its event loop for each new cuff, and a frozen server held every cuff's session
    /// for its statement timeout, 60 s (probe S).
    private let serverMarks = Mutex<[String: UInt16]?>(nil)
    /// One drain at a time (the shipper thread, ``finish()``, ``shipAll()``).
    private let shipping = Mutex<Void>(())
    private let wake = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)
    private let running = Atomic<Bool>(false)
    private let done = Atomic<Bool>(false)

    /// What an outbox's readings are kept for: the server and the database
    /// (`postgres://HOST:PORT/DATABASE`, or the socket's path for HOST:PORT), whoever logs in.
    public static func destination(_ url: PostgresURL) -> String { "postgres://\(url.serverName)/\(url.database)" }

    /// Opens the outbox (creating it, mode 0600) and connects to the server. With `background`, a
    /// thread ships while the store is open (from what earlier runs left, at once).
    ///
    /// Throws when the server refuses this cuff or the outbox cannot be opened; an unreachable
    /// server is said once through `warn` and readings wait in the outbox.
    ///
    /// `outboxPath` nil: the default outbox (``Outbox/defaultPath(environment:)``), unless another
    /// server's database claimed it (``SQLiteStore/claimOutbox(for:takingEmpty:lock:)``); then this
    /// database's own, `outbox-SERVER-DATABASE.db` beside it (with a ``Outbox/tag(_:)`` when that
    /// name is another's too). An outbox given that holds readings for another server's database,
    /// or is open for one in another process, is refused: shipped here, they would land in the
    /// wrong database (``Outbox/open(_:for:takingEmpty:utcOffset:warn:service:mqttURL:)``).
    public init(
        url: PostgresURL, outboxPath: String?, utcOffset: UTCOffsetPolicy = .system, background: Bool = true,
        batchSize: Int = 1000, environment: [String: String] = ProcessInfo.processInfo.environment,
        warn: @escaping SinkWarningHandler = SinkWarnings.standardError
    ) throws(SinkError) {
        let destination = Self.destination(url)
        let name = "\(url.serverName)-\(url.database)"
        let opened = try Outbox.open(
            outboxPath.map { [$0] } ?? [
                Outbox.defaultPath(environment: environment), Outbox.defaultPath(named: name, environment: environment),
                Outbox.defaultPath(named: name, tagged: true, environment: environment),
            ], for: destination, takingEmpty: outboxPath != nil, utcOffset: utcOffset, warn: warn,
            service: "this store")
        outbox = opened.store
        lock = opened.lock
        // (Said: a changed URL, `localhost` for `127.0.0.1`, would otherwise leave them unseen.)
        notices = opened.passed.filter { $0.waiting > 0 }.map { p in
            let d = Outbox.describe(p.holder, path: p.path, mqttURL: { _ in nil })
            return
                "\(p.waiting) reading\(p.waiting == 1 ? "" : "s") for \(d.name) wait\(p.waiting == 1 ? "s" : "") in the outbox \(p.path)"
                + (d.sync.map { "; " + $0 } ?? "")
        }
        for n in notices { warn(SinkWarning(sink: "store", message: n)) }
        let outboxPath = outbox.path
        server = PostgresServer(url: url)
        self.warn = warn
        self.batchSize = max(1, batchSize)
        if let message = url.cleartextWarning { warn(SinkWarning(sink: "store", message: message)) }
        do throws(PostgresStoreError) {
            try server.migrate()
        } catch {
            guard error.transient else {
                try? outbox.finish()
                throw .storeOpen(path: url.description, reason: error.description)
            }
            failure.withLock { $0 = error }
            warn(
                SinkWarning(
                    sink: "store",
                    message: "\(error.description); readings wait in the outbox \(outboxPath) until it can be reached"))
        }
        if background {
            running.store(true, ordering: .relaxed)
            let t = Thread { [self] in shipLoop() }
            t.name = "cuff-outbox-shipper"
            t.start()
            wake.signal()
        }
    }

    // MARK: MeasurementStore

    /// The outbox's keys and, when the server answers, the server's.
    public func knownKeys() throws(SinkError) -> Set<String> {
        var keys = try outbox.knownKeys()
        if failure.withLock({ $0 }) == nil, let remote = try? server.knownKeys() {
            serverKeys.withLock { $0.formUnion(remote) }
            readServerMarks()
        }
        keys.formUnion(serverKeys.withLock { $0 })
        return keys
    }

    public func lastSequenceNumber(address: String) throws(SinkError) -> UInt16? {
        let local = try outbox.lastSequenceNumber(address: address)
        // (With a shipper, only it asks the server, once it answers: this runs on watch's loop.)
        let remote = serverMarks.withLock { $0 } ?? (running.load(ordering: .relaxed) ? nil : readServerMarks())
        return [local, remote?[address]].compactMap { $0 }.max()
    }

    /// Reads ``serverMarks`` when the server answered last time (or at open), once; nil when it did not.
    @discardableResult
    private func readServerMarks() -> [String: UInt16]? {
        guard failure.withLock({ $0 }) == nil, let marks = try? server.lastSequenceNumbers() else { return nil }
        serverMarks.withLock { $0 = $0 ?? marks }
        return marks
    }

    /// Commits `m` to the outbox (fsynced) and wakes the shipper. A reading the server is known to
    /// hold already is a duplicate, as is one waiting in the outbox.
    @discardableResult
    public func insert(_ m: MeasurementRecord) throws(SinkError) -> StoreInsertOutcome {
        if done.load(ordering: .relaxed) { throw .finished(sink: "store") }
        if serverKeys.withLock({ $0.contains(m.dedupKey) }) { return .duplicate }
        let outcome = try outbox.insert(m)
        if outcome.isNew { wake.signal() }
        return outcome
    }

    @discardableResult
    public func insert(contentsOf ms: [MeasurementRecord]) throws(SinkError) -> Int {
        if done.load(ordering: .relaxed) { throw .finished(sink: "store") }
        let known = serverKeys.withLock { $0 }
        let n = try outbox.insert(contentsOf: known.isEmpty ? ms : ms.filter { !known.contains($0.dedupKey) })
        if n > 0 { wake.signal() }
        return n
    }

    /// What the server holds (readings still in the outbox are not in it yet).
    public func history() throws(SinkError) -> [StoredMeasurement] {
        do throws(PostgresStoreError) { return try server.history() } catch {
            throw .storeRead(path: storeName, reason: error.description)
        }
    }

    /// ``history()`` with rows that cannot be read skipped and named (``PostgresServer/readHistory()``).
    public func readHistory() throws(SinkError) -> StoreReading {
        do throws(PostgresStoreError) { return try server.readHistory() } catch {
            throw .storeRead(path: storeName, reason: error.description)
        }
    }

    public func write(_ o: SessionOutput) throws(SinkError) {
        guard case let .measurement(m) = o else {
            if done.load(ordering: .relaxed) { throw .finished(sink: "store") }
            return
        }
        try insert(m)
    }

    /// How long a stopping store still ships (and waits for a shipment under way): a server that
    /// does not answer by then leaves the rest in the outbox.
    public static let stoppingSeconds = 2.0

    /// Cuts the server off ``stoppingSeconds`` from now, unless cancelled first.
    func stoppingWatchdog() -> DispatchWorkItem {
        let watchdog = DispatchWorkItem { [server] in server.interrupt() }
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.stoppingSeconds, execute: watchdog)
        return watchdog
    }

    /// Stops the shipper, tries once more to ship what waits, and closes the outbox, in at most
    /// ``stoppingSeconds``. An unreachable server is not a failure: how many readings wait is
    /// said through `warn`.
    public func finish() throws(SinkError) {
        guard !done.exchange(true, ordering: .relaxed) else { throw .finished(sink: "store") }
        let watchdog = stoppingWatchdog()
        defer { watchdog.cancel() }
        if running.load(ordering: .relaxed) {
            stopping.store(true, ordering: .relaxed)
            wake.signal()
            stopped.wait()
        }
        let result = drain()
        let waiting = (try? outbox.count()) ?? 0
        if waiting > 0 {
            let why = result.failure.map { ": " + $0.description } ?? ""
            warn(
                SinkWarning(
                    sink: "store",
                    message:
                        "\(waiting) reading\(waiting == 1 ? "" : "s") wait\(waiting == 1 ? "s" : "") in the outbox \(outbox.path)\(why); "
                        + "cuff sync --store URL --outbox \(outbox.path) ships them"))
        }
        server.disconnect()
        defer { lock.release() }
        try outbox.finish()
    }

    /// Closes without shipping or saying anything (after ``drain()``, with no shipper thread).
    public func close() throws(SinkError) {
        guard !done.exchange(true, ordering: .relaxed) else { throw .finished(sink: "store") }
        let watchdog = stoppingWatchdog()
        defer { watchdog.cancel() }
        if running.load(ordering: .relaxed) {
            stopping.store(true, ordering: .relaxed)
            wake.signal()
            stopped.wait()
        }
        server.disconnect()
        defer { lock.release() }
        try outbox.finish()
    }

    // MARK: Shipping

    /// What a drain did.
    public struct ShipResult: Sendable {
        /// Readings the server committed (new there, or already there).
        public var shipped: Int
        /// Of those, how many the server did not have yet.
        public var new: Int
        /// Why it stopped before the outbox was empty, or nil when it is empty.
        public var failure: PostgresStoreError?
        /// Rows of the outbox this drain found it cannot read, left there (each said through
        /// `warn` once), and why, for the first few.
        public var unreadable = UnreadableOutboxRows()
    }

    /// Ships batches until the outbox is empty or the server fails (then stops; rows not committed
    /// stay in the outbox). `cuff sync` and the benchmark call this with no shipper thread.
    public func drain() -> ShipResult {
        shipping.withLock { _ in
            var result = ShipResult(shipped: 0, new: 0, failure: nil)
            while true {
                let batch: [StoredMeasurement]
                do {
                    // A row that cannot be read stays in the outbox (said once, while it stays) and
                    // the rest ship (probe Y: one damaged row held back every later reading).
                    let read = try outbox.pendingReadable(limit: batchSize + unreadable.withLock { $0.count })
                    for p in read.skipped {
                        result.unreadable.note(p.rowID, p.description)
                        if unreadable.withLock({ $0.note(p.rowID, p.description) }) {
                            warn(
                                SinkWarning(
                                    sink: "store", message: "outbox \(outbox.path): \(p.description); left there"))
                        }
                    }
                    batch = read.rows
                } catch {
                    result.failure = PostgresStoreError(
                        server: "outbox \(outbox.path)", message: "\(error)", transient: false)
                    break
                }
                if batch.isEmpty { break }
                do throws(PostgresStoreError) {
                    result.new += try server.ship(batch)
                } catch {
                    result.failure = error
                    break
                }
                // Committed on the server: now, and only now, out of the outbox. A kill between the
                // two ships the batch again next time, which the unique key makes harmless.
                do { try outbox.remove(ids: batch.map(\.id)) } catch {
                    result.failure = PostgresStoreError(
                        server: "outbox \(outbox.path)", message: "\(error)", transient: false)
                    break
                }
                serverKeys.withLock { k in for m in batch { k.insert(m.dedupKey) } }
                result.shipped += batch.count
            }
            failure.withLock { $0 = result.failure }
            return result
        }
    }

    /// The shipper thread: drains when woken; after a failure, tries again after a pause that
    /// grows from 0.5 s to 10 s.
    ///
    /// A failure is said through `warn` once, until the server takes readings again, which is
    /// said too (probe S: a 20 s outage of the server under `cuff watch` said nothing at all).
    private func shipLoop() {
        var pause = 0.5
        var said = failure.withLock { $0 }?.description  // (said at open)
        var shippedSinceSaid = 0
        while !stopping.load(ordering: .relaxed) {
            if failure.withLock({ $0 }) != nil {
                _ = wake.wait(timeout: .now() + pause)
            } else {
                wake.wait()
            }
            if stopping.load(ordering: .relaxed) { break }
            // Several wake-ups for one drain.
            while wake.wait(timeout: .now()) == .success {}
            let r = drain()
            pause = r.failure == nil ? 0.5 : min(pause * 2, 10)
            if stopping.load(ordering: .relaxed) { break }  // (finish() says what is left)
            if r.failure != nil || said != nil { shippedSinceSaid += r.shipped }
            if let f = r.failure {
                if f.description != said {
                    said = f.description
                    warn(
                        SinkWarning(
                            sink: "store",
                            message: "\(f.description); readings wait in the outbox \(outbox.path); trying again"))
                }
            } else {
                // (Only a batch the server took says it is back: an empty outbox asks it nothing.)
                if said != nil, r.shipped > 0 {
                    warn(
                        SinkWarning(
                            sink: "store",
                            message:
                                "\(server.url.serverName) takes readings again: \(shippedSinceSaid) shipped from the outbox"
                        ))
                    said = nil
                    shippedSinceSaid = 0
                }
                if serverMarks.withLock({ $0 }) == nil { readServerMarks() }
            }
        }
        stopped.signal()
    }
}

/// The ``StoreOpener`` the CLI gives to ``SinkConfiguration``: `postgres://` and `postgresql://`
/// URLs, with the outbox at `outboxPath` (nil: the default, see ``PostgresOutboxStore/init(url:outboxPath:utcOffset:background:batchSize:environment:warn:)``).
public struct PostgresStoreOpener: StoreOpener {
    public var outboxPath: String?
    public var background: Bool

    public init(outboxPath: String? = nil, background: Bool = true) {
        self.outboxPath = outboxPath
        self.background = background
    }

    public func handles(_ location: String) -> Bool { SinkFactory.isServerStore(location) }

    public func open(
        _ location: String, _ options: SinkConfiguration, purpose: StorePurpose, warn: @escaping SinkWarningHandler
    ) throws(SinkError)
        -> any MeasurementStore
    {
        let url: PostgresURL
        do { url = try PostgresURL(parsing: location) } catch {
            throw .storeOpen(path: PostgresURL.redacting(location), reason: error.description)
        }
        if let key = options.storeKeyPath {
            throw .storeKey(
                path: url.description,
                reason:
                    "--store-key-file (\(key)) encrypts SQLite stores only; a PostgreSQL store is protected by the server (TLS, roles, its disk)"
            )
        }
        switch purpose {
        case .write:
            return try PostgresOutboxStore(
                url: url, outboxPath: outboxPath, utcOffset: options.utcOffset,
                background: background, warn: warn)
        case .read:
            return try PostgresReadStore(url: url)
        }
    }
}

/// `cuff history --store postgres://…`: what the server holds, read directly (no outbox).
public final class PostgresReadStore: MeasurementStore {
    public let server: PostgresServer
    public var storeName: String { server.url.description }

    /// The database has cuff's tables (a database no cuff wrote to reads as empty: nothing is created).
    let hasSchema: Bool

    public init(url: PostgresURL) throws(SinkError) {
        server = PostgresServer(url: url)
        do throws(PostgresStoreError) { hasSchema = try server.hasSchema() } catch {
            throw .storeOpen(path: url.description, reason: error.description)
        }
    }

    public func knownKeys() throws(SinkError) -> Set<String> {
        guard hasSchema else { return [] }
        do throws(PostgresStoreError) { return try server.knownKeys() } catch {
            throw .storeRead(path: storeName, reason: error.description)
        }
    }

    public func lastSequenceNumber(address: String) throws(SinkError) -> UInt16? {
        guard hasSchema else { return nil }
        do throws(PostgresStoreError) { return try server.lastSequenceNumber(address: address) } catch {
            throw .storeRead(path: storeName, reason: error.description)
        }
    }

    public func insert(_ m: MeasurementRecord) throws(SinkError) -> StoreInsertOutcome {
        throw .storeWrite(path: storeName, dedupKey: m.dedupKey, reason: "opened for reading")
    }

    public func insert(contentsOf ms: [MeasurementRecord]) throws(SinkError) -> Int {
        throw .storeWrite(path: storeName, dedupKey: ms.first?.dedupKey ?? "-", reason: "opened for reading")
    }

    public func history() throws(SinkError) -> [StoredMeasurement] {
        guard hasSchema else { return [] }
        do throws(PostgresStoreError) { return try server.history() } catch {
            throw .storeRead(path: storeName, reason: error.description)
        }
    }

    public func readHistory() throws(SinkError) -> StoreReading {
        guard hasSchema else { return StoreReading(rows: []) }
        do throws(PostgresStoreError) { return try server.readHistory() } catch {
            throw .storeRead(path: storeName, reason: error.description)
        }
    }

    public func write(_ o: SessionOutput) throws(SinkError) {
        if case let .measurement(m) = o { try insert(m) }
    }

    public func finish() throws(SinkError) { server.disconnect() }
}
