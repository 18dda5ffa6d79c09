// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import GRDB
import StoreFormat
import Transport

/// A plain SQLite store used as an outbox (`--outbox PATH`, in front of a server store): readings
/// are committed here before the cuff is confirmed, read out oldest first, and removed only once
/// the server has committed them.
extension SQLiteStore {
    /// Up to `limit` stored rows, oldest insertion first (lowest id), with their devices.
    /// A row that cannot be read is an error naming it (``pendingReadable(limit:)`` skips such rows instead).
    public func pending(limit: Int) throws(SinkError) -> [StoredMeasurement] {
        let r = try pendingReadable(limit: limit)
        if let p = r.skipped.first { throw SinkError.storeRead(path: path, reason: p.description) }
        return r.rows
    }

    /// The first `limit` rows, oldest insertion first (lowest id): those that can be read, with
    /// their devices, and those that cannot (a damaged cell, a missing device row), named. A
    /// shipper leaves the second kind in the outbox, says so once, and ships the rest (probe Y: one
    /// damaged row stopped every later reading from reaching the broker or the server).
    public func pendingReadable(limit: Int) throws(SinkError) -> StoreReading {
        guard crypto == nil else { throw .storeRead(path: path, reason: "an encrypted store is not an outbox") }
        do {
            var r = try db.read { db in
                try SQLiteStore.readRows(
                    db, sql: StoreRows.pendingSQL(deviceColumns: SQLiteStore.deviceColumns(db)), arguments: [limit])
            }
            if r.withoutDevice > 0 {
                for row in r.rows where row.device.address.isEmpty {
                    r.skipped.append(StoreRowProblem(rowID: row.id, column: "device_id", kind: .missingDevice))
                }
                r.rows.removeAll { $0.device.address.isEmpty }
                r.withoutDevice = 0
            }
            r.skipped.sort { $0.rowID < $1.rowID }
            return r
        } catch {
            throw .storeRead(path: path, reason: SQLiteStore.describe(error))
        }
    }

    /// Removes the rows with these ids (shipped ones), in one commit. With `rememberingKeys`, their
    /// dedup keys (and devices' addresses and sequence numbers) stay in `outbox_sent` in the same
    /// commit: an MQTT broker keeps no history to ask what it already has (see ``sentKeys()``).
    public func remove(ids: [Int64], rememberingKeys: Bool = false) throws(SinkError) {
        guard !ids.isEmpty else { return }
        do {
            try db.write { db in
                if rememberingKeys { try db.execute(sql: Self.sentTable) }
                // In chunks: SQLite limits the number of bound parameters.
                var i = 0
                while i < ids.count {
                    let chunk = Array(ids[i..<min(i + 500, ids.count)])
                    let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                    if rememberingKeys {
                        try db.execute(
                            sql: """
                                INSERT OR IGNORE INTO outbox_sent (dedup_key, address, sequence_number)
                                SELECT m.dedup_key, d.address, m.sequence_number FROM measurements m JOIN devices d ON d.id = m.device_id
                                WHERE m.id IN (\(marks))
                                """, arguments: StatementArguments(chunk))
                    }
                    try db.execute(
                        sql: "DELETE FROM measurements WHERE id IN (\(marks))", arguments: StatementArguments(chunk))
                    i += chunk.count
                }
            }
        } catch {
            throw .storeWrite(path: path, dedupKey: "(outbox removal)", reason: SQLiteStore.describe(error))
        }
    }

    /// How many measurements the store holds.
    public func count() throws(SinkError) -> Int {
        do {
            return try db.read { db in
                try Int.fetchOne(
                    db,
                    sql: crypto == nil
                        ? "SELECT count(*) FROM measurements" : "SELECT count(*) FROM sealed_measurements") ?? 0
            }
        } catch {
            throw .storeRead(path: path, reason: SQLiteStore.describe(error))
        }
    }

    static let sentTable = """
        CREATE TABLE IF NOT EXISTS outbox_sent (
            dedup_key TEXT PRIMARY KEY,
            address TEXT NOT NULL,
            sequence_number INTEGER
        )
        """

    /// The dedup keys of the rows removed with `rememberingKeys` (delivered, no longer in the outbox).
    public func sentKeys() throws(SinkError) -> Set<String> {
        do {
            try db.write { try $0.execute(sql: Self.sentTable) }
            return try db.read { Set(try String.fetchAll($0, sql: "SELECT dedup_key FROM outbox_sent")) }
        } catch {
            throw .storeRead(path: path, reason: SQLiteStore.describe(error))
        }
    }

    /// The highest sequence number among the delivered rows of the device last seen at `address`.
    public func lastSentSequenceNumber(address: String) throws(SinkError) -> UInt16? {
        do {
            try db.write { try $0.execute(sql: Self.sentTable) }
            let v = try db.read {
                try Int64.fetchOne(
                    $0, sql: "SELECT max(sequence_number) FROM outbox_sent WHERE address = ?", arguments: [address])
            }
            return v.flatMap { UInt16(exactly: $0) }
        } catch {
            throw .storeRead(path: path, reason: SQLiteStore.describe(error))
        }
    }
}

extension SQLiteStore {
    /// What ``claimOutbox(for:takingEmpty:lock:)`` found.
    public enum OutboxClaim: Sendable, Equatable {
        /// The outbox is this destination's: it was already, or it was nobody's yet (a new
        /// outbox, or one an earlier cuff kept without saying whose it is).
        case claimed
        /// It was another destination's, empty and open in no other process: it is this one's
        /// now, and the dedup keys delivered to the other are forgotten (this destination never
        /// had those readings).
        case taken(from: String)
        /// Readings for another destination wait in it; nothing was changed.
        case heldFor(String, waiting: Int)
        /// Another destination's, empty, but open in another process (which may keep a reading
        /// for it at any moment); nothing was changed.
        case inUse(by: String)
    }

    /// Claims an outbox for one destination (``Outbox/mqttDestination(prefix:)``, or a
    /// `postgres://` URL): an outbox's readings go to the destination they were kept for, never
    /// to another that happens to open the same file (two processes, or a changed URL, with one
    /// outbox). In one transaction. An empty outbox of another destination passes to this one
    /// only with `takingEmpty`, and only when `lock` shows no other process has it open
    /// (``OutboxLock/alone(_:)``): a claim never changes under a process that uses the outbox.
    public func claimOutbox(for destination: String, takingEmpty: Bool = true, lock: OutboxLock? = nil)
        throws(SinkError) -> OutboxClaim
    {
        do {
            return try db.write { db in
                try db.execute(sql: Self.destinationTable)
                // (As text whatever was stored there; a table left without a usable row is claimed anew.)
                guard let held = try Self.claimant(db) else {
                    try db.execute(sql: "DELETE FROM outbox_destination")
                    try db.execute(
                        sql: "INSERT INTO outbox_destination (destination) VALUES (?)", arguments: [destination])
                    return .claimed
                }
                if held == destination { return .claimed }
                let waiting = try Int.fetchOne(db, sql: "SELECT count(*) FROM measurements") ?? 0
                if waiting > 0 || !takingEmpty { return .heldFor(held, waiting: waiting) }
                return try (lock ?? OutboxLock.unshared).alone { () throws -> OutboxClaim in
                    try db.execute(sql: "UPDATE outbox_destination SET destination = ?", arguments: [destination])
                    try db.execute(sql: Self.sentTable)
                    try db.execute(sql: "DELETE FROM outbox_sent")
                    return .taken(from: held)
                } ?? .inUse(by: held)
            }
        } catch {
            throw .storeOpen(path: path, reason: "cannot claim it as an outbox: \(SQLiteStore.describe(error))")
        }
    }

    /// The destination an outbox is claimed for, nil when none.
    static func claimant(_ db: Database) throws -> String? {
        try String.fetchOne(
            db,
            sql:
                "SELECT CAST(destination AS TEXT) FROM outbox_destination WHERE destination IS NOT NULL ORDER BY rowid LIMIT 1"
        )
    }

    /// The readings waiting in the outbox at `path` for `destination`: in one it claims, or one
    /// no destination ever claimed (kept by a cuff from before outboxes were claimed); nil when
    /// there is no such file, it is another's, it is empty, or it cannot be read. Read-only:
    /// nothing is made or changed.
    public static func outboxWaiting(path: String, for destination: String) -> Int? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        var config = Configuration()
        config.readonly = true
        config.busyMode = .timeout(1)
        do {
            let queue = try DatabaseQueue(path: path, configuration: config)
            defer { try? queue.close() }
            return try queue.read { db -> Int? in
                guard try db.tableExists("measurements") else { return nil }
                if try db.tableExists("outbox_destination"), let held = try claimant(db), held != destination {
                    return nil
                }
                let n = try Int.fetchOne(db, sql: "SELECT count(*) FROM measurements") ?? 0
                return n > 0 ? n : nil
            }
        } catch {
            return nil
        }
    }

    static let destinationTable = "CREATE TABLE IF NOT EXISTS outbox_destination (destination TEXT NOT NULL)"
}

/// A process's hold on an outbox it has open: a shared `flock` on `PATH.lock` (mode 0600, beside
/// it, never removed), kept until ``release()`` or the end of the process. Moving an empty outbox
/// to another destination needs the lock alone, so no process that has the outbox open ever sees
/// its claim change (``SQLiteStore/claimOutbox(for:takingEmpty:lock:)``).
public final class OutboxLock: @unchecked Sendable {
    private var fd: CInt?

    /// No lock: as if alone (an outbox opened by a caller that takes none, as tests do).
    static let unshared = OutboxLock()
    private init() {}

    /// Takes the shared lock, waiting at most 5 s for a process that holds it alone (for the
    /// moment of a claim's change).
    public init(outbox path: String) throws(SinkError) {
        let lockPath = path + ".lock"
        let fd: CInt
        switch Sys.open(lockPath, O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o600) {
        case .success(let f): fd = f
        case .failure(let e): throw .storeOpen(path: path, reason: "cannot open its lock \(lockPath): \(e)")
        }
        var attempts = 0
        while true {
            switch Sys.flock(fd, LOCK_SH | LOCK_NB) {
            case .success:
                self.fd = fd
                return
            case .failure(let e) where e == .wouldBlock && attempts < 250:  // (250 × 20 ms: 5 s)
                attempts += 1
                MonotonicClock.sleep(nanoseconds: 20_000_000)
            case .failure(let e):
                _ = Sys.close(fd)
                throw .storeOpen(path: path, reason: "cannot lock \(lockPath): \(e)")
            }
        }
    }

    /// Runs `body` if no other process holds the lock (it is held alone meanwhile, then shared
    /// again); nil without running it otherwise.
    func alone<T>(_ body: () throws -> T) rethrows -> T? {
        guard let fd else { return try body() }
        guard case .success = Sys.flock(fd, LOCK_EX | LOCK_NB) else {
            // (A failed conversion may have dropped the shared lock: taken again.)
            _ = Sys.flock(fd, LOCK_SH)
            return nil
        }
        defer { _ = Sys.flock(fd, LOCK_SH) }
        return try body()
    }

    /// Drops the lock (closing its file).
    public func release() {
        if let fd { _ = Sys.close(fd) }
        fd = nil
    }

    deinit { release() }
}

/// The outbox's place: `--outbox PATH`, else `$XDG_STATE_HOME/cuff/outbox.db` (by default
/// `~/.local/state/cuff/outbox.db`).
public enum Outbox {
    public static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        stateDirectory(environment: environment) + "/outbox.db"
    }

    /// An MQTT topic prefix as an outbox's claim (``SQLiteStore/claimOutbox(for:takingEmpty:lock:)``);
    /// a PostgreSQL database's is its `postgres://HOST:PORT/DATABASE`.
    public static func mqttDestination(prefix: String) -> String { "mqtt:" + prefix }

    /// A claim in words, and the `cuff sync` that ships what waits for it (`mqttURL`: the
    /// `--publish` URL for a topic prefix, nil when no broker is known; nil for a claim cuff does
    /// not know).
    public static func describe(_ destination: String, path: String, mqttURL: (String) -> String?)
        -> (name: String, sync: String?)
    {
        if destination.hasPrefix("mqtt:") {
            let prefix = String(destination.dropFirst(5))
            return (
                "the MQTT topic prefix \(prefix)",
                "cuff sync --publish \(mqttURL(prefix) ?? "mqtt://BROKER/\(prefix)") --outbox \(path) publishes them there"
            )
        }
        if destination.hasPrefix("postgres://") {
            return (
                "the PostgreSQL database \(destination)",
                "cuff sync --store \(destination) (with its user) --outbox \(path) ships them there"
            )
        }
        return (destination, nil)
    }

    /// An outbox opened and claimed for one destination, with the process's lock on it, and the
    /// outboxes passed over on the way there that hold readings for others.
    public struct Opened {
        public let store: SQLiteStore
        public let lock: OutboxLock
        public var passed: [(path: String, holder: String, waiting: Int)] = []
    }

    /// Opens the first of `candidates` that is, or becomes, `destination`'s: each but the last
    /// only when it is this destination's or nobody's (the defaults: `outbox.db`, then names
    /// made from the destination, then such a name with a ``tag(_:)``); the last also when it is
    /// another's and empty (with `takingEmpty`, and no other process has it open). Refused, with
    /// `service`'s words ("this store", "this --publish") and `mqttURL` for the advice, when the
    /// last is another's.
    public static func open(
        _ candidates: [String], for destination: String, takingEmpty: Bool, utcOffset: UTCOffsetPolicy,
        warn: @escaping SinkWarningHandler, service: String, mqttURL: (String) -> String? = { _ in nil }
    ) throws(SinkError) -> Opened {
        var passed: [(path: String, holder: String, waiting: Int)] = []
        for (i, path) in candidates.enumerated() {
            let last = i == candidates.count - 1
            try prepareDirectory(of: path)
            let lock = try OutboxLock(outbox: path)
            let store = try SQLiteStore(path: path, utcOffset: utcOffset, warn: warn)
            let claim: SQLiteStore.OutboxClaim
            do throws(SinkError) {
                guard !store.isEncrypted else {
                    throw SinkError.storeOpen(path: path, reason: "is an encrypted store, not an outbox")
                }
                claim = try store.claimOutbox(for: destination, takingEmpty: last && takingEmpty, lock: lock)
            } catch {
                try? store.finish()
                throw error
            }
            let holder: String
            let waiting: Int
            switch claim {
            case .claimed, .taken: return Opened(store: store, lock: lock, passed: passed)
            case let .heldFor(h, n): (holder, waiting) = (h, n)
            case let .inUse(h): (holder, waiting) = (h, 0)
            }
            try? store.finish()
            lock.release()
            if !last {
                passed.append((path, holder, waiting))
                continue
            }
            let theirs = describe(holder, path: path, mqttURL: mqttURL)
            let mine = describe(destination, path: path, mqttURL: mqttURL).name
            if waiting == 0 {
                throw .storeOpen(
                    path: path,
                    reason:
                        "is open in another process for \(theirs.name), not \(mine) (empty, but that process may keep a reading in it at any moment); give \(service) an --outbox of its own"
                )
            }
            throw .storeOpen(
                path: path,
                reason:
                    "holds \(waiting) reading\(waiting == 1 ? "" : "s") for \(theirs.name), not \(mine): "
                    + (theirs.sync.map { $0 + "; or " } ?? "") + "give \(service) an --outbox of its own")
        }
        throw .storeOpen(path: candidates.last ?? "", reason: "no outbox to open")  // (never: one candidate at least)
    }

    /// A short, stable tag for `s` (FNV-1a over its UTF-8, 8 hex digits): it tells apart names
    /// that ``slug(_:)`` makes the same (`a/b`, `a_b`) or cuts.
    public static func tag(_ s: String) -> String {
        var h: UInt32 = 0x811C_9DC5
        for b in s.utf8 { h = (h ^ UInt32(b)) &* 0x0100_0193 }
        let hex = String(h, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }

    /// ``slug(_:)`` of `name`, at most 64 characters, and, as `tagged`, the same with ``tag(_:)`` appended.
    public static func fileNames(_ name: String) -> (plain: String, tagged: String) {
        let slug = String(slug(name).prefix(64))
        return (slug, slug + "-" + tag(name))
    }

    /// The default outbox of one destination when `outbox.db` is another's:
    /// `$XDG_STATE_HOME/cuff/outbox-NAME.db`, `NAME` made of ASCII letters, digits, `-` and `_`.
    /// (`tagged`: with ``tag(_:)`` too, for when the plain name is another destination's.)
    public static func defaultPath(
        named name: String, tagged: Bool = false, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String {
        let names = fileNames(name)
        return stateDirectory(environment: environment) + "/outbox-\(tagged ? names.tagged : names.plain).db"
    }

    /// `s` for a file name: every character but ASCII letters, digits, `-` and `_` made `_`.
    public static func slug(_ s: String) -> String {
        String(
            s.unicodeScalars.map { c -> Character in
                c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c) || c == "-" || c == "_")
                    ? Character(c) : "_"
            })
    }

    /// Cuff's state directory (``StateDirectory/cuff(environment:)``): where outboxes are kept by default.
    public static func stateDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        StateDirectory.cuff(environment: { environment[$0] })
    }

    /// Creates the outbox's directory if missing (mode 0700, with its missing parents).
    public static func prepareDirectory(of path: String) throws(SinkError) {
        let dir = (path as NSString).deletingLastPathComponent
        guard !dir.isEmpty, !FileManager.default.fileExists(atPath: dir) else { return }
        do {
            try FileManager.default.createDirectory(
                atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw .storeOpen(path: path, reason: "cannot create its directory \(dir): \(error.localizedDescription)")
        }
    }
}
