// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import Crypto
import CuffCore
import CuffSession
import Foundation
import GRDB
import StoreFormat
import Transport

#if canImport(Glibc)
    import Glibc
#endif

/// `--store PATH`: measurements kept in SQLite (GRDB), deduplicated by ``MeasurementRecord/dedupKey``.
///
/// * The file is created with mode 0600 before SQLite opens it; an existing file that group or
///   others can read or write, a symlink, or a non-regular file is refused. SQLite gives its `-wal`
///   and `-shm` files the database file's mode.
/// * Durable on return: WAL journal with `synchronous = FULL`, so each commit fsyncs the WAL and a
///   kill -9 (or power loss) right after ``write(_:)`` returns keeps the row. Both are checked at open.
/// * Schema by migrations, applied in one immediate transaction (see ``migrate(_:)``); `v1` makes
///   `devices` (one row per ``DeviceInfo/identity``, names updated as they are learned) and
///   `measurements` (see ``StoredMeasurement``).
/// * Session and progress records are not stored.
/// * Encrypted when made with a ``StoreKey`` (`--store-key-file`): then the file holds, per
///   measurement, only an HMAC tag of its dedup key and the whole row sealed with AES-256-GCM (bound
///   to that tag), so no value, time, raw byte, name, serial or address is readable in the file, its
///   WAL or its journal, and a changed byte is detected. Such a store opens with its key only; a
///   plain store never opens with a key.
public final class SQLiteStore: MeasurementStore {
    public let path: String
    let db: DatabaseQueue
    /// The subkeys, for an encrypted store.
    let crypto: StoreCrypto?
    /// Whether the rows are sealed (the store was made with a key).
    public var isEncrypted: Bool { crypto != nil }
    public let utcOffset: UTCOffsetPolicy
    let warn: SinkWarningHandler
    /// Opened read-only (``init(path:mustExist:readOnly:key:utcOffset:warn:)``).
    public let readOnly: Bool
    /// False for a read-only store whose file has no tables at all (an empty file): nothing to read.
    let hasTables: Bool
    /// The store file's device and inode when opened for writing: a file removed or replaced
    /// while open would keep taking readings that nobody can ever read (``checkLinked(afterWrite:dedupKey:)``).
    let fileIdentity: (device: UInt64, inode: UInt64)?
    private let done = FinishGuard("store")
    /// The `decoded` column's text is written here (used inside the write transaction only, one
    /// row at a time): building the ``JSON`` value and serialising it were about 100,000
    /// instructions a reading under callgrind, a third of `cuff watch`'s store insert.
    private let decodedText = NDJSONLineBuffer(capacity: 2048)

    /// What ``insert(_:)`` did.
    public typealias InsertOutcome = StoreInsertOutcome

    public var storeName: String { path }

    /// Opens (creating if needed, mode 0600, unless `mustExist`) and migrates the store at `path`.
    ///
    /// With `key`, a new store is made encrypted and an existing one must be encrypted with it;
    /// without, an encrypted store is refused. A refusal changes nothing on disk.
    ///
    /// `readOnly` (`cuff history`, `cuff plot --store`): the store must exist and is opened read-only:
    /// no schema is made or migrated, the journal mode is left as it is, and nothing is written
    /// (a file with no tables at all reads as an empty store).
    public init(
        path: String, mustExist: Bool = false, readOnly: Bool = false, key: StoreKey? = nil,
        utcOffset: UTCOffsetPolicy = .system,
        warn: @escaping SinkWarningHandler = SinkWarnings.standardError
    ) throws(SinkError) {
        self.path = path
        self.utcOffset = utcOffset
        self.warn = warn
        self.readOnly = readOnly
        try SQLiteStore.prepareFile(path, create: !mustExist && !readOnly, readOnly: readOnly)
        var config = Configuration()
        config.label = "cuff.store"
        config.busyMode = .timeout(5)
        config.readonly = readOnly
        if !readOnly {
            config.prepareDatabase { db in
                // Not `journalMode = .wal`: GRDB then sets synchronous = NORMAL, which may lose the last commit.
                let mode = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
                guard mode == "wal" else { throw DatabaseError(message: "journal_mode is \(mode ?? "nil"), not wal") }
                try db.execute(sql: "PRAGMA synchronous = FULL")
                try db.execute(sql: "PRAGMA foreign_keys = ON")
            }
        }
        do {
            if readOnly {
                func open(_ location: String) throws -> (DatabaseQueue, Layout) {
                    let queue = try DatabaseQueue(path: location, configuration: config)
                    do {
                        return (queue, try queue.read { db in try SQLiteStore.layout(db, key: key, path: path) })
                    } catch {
                        try? queue.close()
                        throw error
                    }
                }
                let opened: (DatabaseQueue, Layout)
                do {
                    opened = try open(path)
                } catch let e as DatabaseError
                    where (e.resultCode == .SQLITE_CANTOPEN || e.resultCode == .SQLITE_READONLY)
                    && SQLiteStore.hasNoWriteAheadLog(path)
                {
                    // A WAL store on read-only media (a backup, a snapshot, a stick mounted read-only):
                    // SQLite cannot make the `-shm` beside it (probe X). With no `-wal` there, the
                    // file holds every commit and cannot change: it is read as immutable.
                    opened = try open(SQLiteStore.immutableURI(path))
                }
                let (queue, layout) = opened
                if !layout.sealed && !layout.plain && layout.hasTables {
                    // Another program's database: neither read as empty nor given our tables.
                    throw DatabaseError(message: "not a cuff store (it has tables, but no measurements)")
                }
                db = queue
                crypto = layout.crypto
                hasTables = layout.sealed || layout.plain
                fileIdentity = nil
                return
            }
            // Several processes opening one new store at once: the switch to WAL and the schema
            // need the write lock, and SQLite may answer "busy" at once instead of waiting for it
            // (a lock upgrade it cannot wait for). Such an open is tried again, for up to 10 s.
            var attempt = 0
            var opened: (DatabaseQueue, StoreCrypto?)
            while true {
                do {
                    let queue = try DatabaseQueue(path: path, configuration: config)
                    opened = (queue, try SQLiteStore.migrate(queue, key: key, path: path))
                    break
                } catch let e as DatabaseError where e.resultCode == .SQLITE_BUSY && attempt < 100 {
                    attempt += 1
                    MonotonicClock.sleep(nanoseconds: 100_000_000)
                }
            }
            db = opened.0
            crypto = opened.1
            hasTables = true
            // A file SQLite's quick check finds damaged (a page, an index) takes nothing more:
            // probe D3, a store whose dedup index was broken kept taking readings (and confirming
            // them) that `cuff history` could not read back, and dedup cannot hold on a broken index.
            let problems = try opened.0.read { try String.fetchAll($0, sql: "PRAGMA quick_check(3)") }
            if problems != ["ok"] {
                try? opened.0.close()
                throw SinkError.storeOpen(
                    path: path,
                    reason:
                        "the store is damaged (SQLite's quick check: \(problems.joined(separator: "; "))), so cuff keeps nothing in it and confirms nothing; `sqlite3 \(path) 'REINDEX;'` rebuilds a damaged index, `sqlite3 \(path) .recover` saves what can be read"
                )
            }
            if case .success(let st) = Sys.fileStatus(path) {
                fileIdentity = (UInt64(st.st_dev), UInt64(st.st_ino))
            } else {
                fileIdentity = nil
            }
            let sync = try db.read { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
            guard sync == 2 else {
                throw DatabaseError(message: "synchronous is \(sync.map(String.init) ?? "nil"), not FULL (2)")
            }
        } catch let e as SinkError {
            throw e
        } catch {
            throw .storeOpen(path: path, reason: SQLiteStore.describe(error))
        }
    }

    /// True when no write-ahead log with content lies beside `path` (every commit is in the file).
    static func hasNoWriteAheadLog(_ path: String) -> Bool {
        switch Sys.fileStatus(path + "-wal") {
        case .success(let st): st.st_size == 0
        case .failure(let e): e == .noSuchFileOrDirectory
        }
    }

    /// `path` as an SQLite URI that opens it immutable (absolute; `%`, `?`, `#` and non-ASCII
    /// bytes escaped).
    static func immutableURI(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var out = "file://"
        for b in absolute.utf8 {
            switch b {
            case UInt8(ascii: "%"), UInt8(ascii: "?"), UInt8(ascii: "#"), 0x80...:
                out += "%" + Hex.digits(b, 2)
            default:
                out.unicodeScalars.append(Unicode.Scalar(b))
            }
        }
        return out + "?immutable=1"
    }

    /// Creates `path` with mode 0600 if it does not exist (and `create`); otherwise checks it is a
    /// regular file (not a symlink) that only its owner can read or write. Existing `-wal`, `-shm`
    /// and `-journal` files must pass the same check.
    public static func prepareFile(_ path: String, create: Bool = true, readOnly: Bool = false) throws(SinkError) {
        let opened =
            create
            ? Sys.open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600) : .failure(Errno(rawValue: EEXIST))
        let st: stat
        switch opened {
        case .success(let fd):
            // A new file: made 0600 whatever the umask.
            defer { _ = Sys.close(fd) }
            if case .failure(let e) = Sys.fchmod(fd, 0o600) {
                throw .storeOpen(path: path, reason: "fchmod 600: \(e)")
            }
            switch Sys.fstat(fd) {
            case .success(let s): st = s
            case .failure(let e): throw .storeOpen(path: path, reason: "fstat: \(e)")
            }
        case .failure(let e) where e.rawValue != EEXIST:
            throw .storeOpen(path: path, reason: e.rawValue == ELOOP ? "is a symbolic link" : "open: \(e)")
        case .failure:
            // An existing file is looked at without opening it: closing a descriptor of a file
            // SQLite has open in this process drops every lock SQLite holds on it (POSIX locks
            // belong to the process), and another process may then take the file as unused and
            // remove its write-ahead log under a connection that still writes to it. (Nor does a
            // FIFO get opened: `cuff history` once hung on one.)
            switch Sys.lstat(path) {
            case .success(let s): st = s
            case .failure(let e):
                throw .storeOpen(path: path, reason: e.rawValue == ENOENT ? "no such file" : "lstat: \(e)")
            }
            if UInt32(st.st_mode) & UInt32(S_IFMT) == UInt32(S_IFLNK) {
                throw .storeOpen(path: path, reason: "is a symbolic link")
            }
            if UInt32(st.st_mode) & UInt32(S_IFMT) == UInt32(S_IFREG),
                case .failure(let e) = Sys.access(path, readOnly ? R_OK : R_OK | W_OK)
            {
                throw .storeOpen(path: path, reason: "open: \(e)")
            }
        }
        let mode = UInt32(st.st_mode)
        guard mode & UInt32(S_IFMT) == UInt32(S_IFREG), mode & 0o077 == 0 else {
            throw .insecureStoreFile(path: path, mode: mode)
        }
        // SQLite's side files hold the same data; refuse ones left behind with a looser mode.
        for suffix in ["-wal", "-shm", "-journal"] {
            guard case .success(let side) = Sys.lstat(path + suffix) else { continue }
            let m = UInt32(side.st_mode)
            guard m & UInt32(S_IFMT) == UInt32(S_IFREG), m & 0o077 == 0 else {
                throw .insecureStoreFile(path: path + suffix, mode: m)
            }
        }
    }

    /// The schema's migrations, oldest first: an identifier and the SQL that makes it.
    static let migrations: [(identifier: String, sql: String)] = [
        ("v1", StoreSchema.v1)
    ]

    /// The encrypted layout's migrations: the key's salt and check, and one sealed row per measurement.
    static let sealedMigrations: [(identifier: String, sql: String)] = [
        (
            "sealed-v1",
            """
            CREATE TABLE store_key (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                salt BLOB NOT NULL,
                key_check BLOB NOT NULL
            );
            CREATE TABLE sealed_measurements (
                id INTEGER PRIMARY KEY,
                dedup_tag BLOB NOT NULL UNIQUE,
                sealed BLOB NOT NULL
            );
            """
        )
    ]

    /// Brings the schema up to date, safe when several processes open one new store at once.
    ///
    /// The check of what is applied and the migrations themselves run in one `BEGIN IMMEDIATE`
    /// transaction: the first opener takes the write lock and makes the schema; the others wait
    /// for it (the busy timeout), then find every migration applied. (GRDB's migrator reads what is
    /// applied before it takes the lock, so two openers could both try to create the tables.) The
    /// applied identifiers live in `grdb_migrations`, the table stores made by GRDB's migrator have.
    ///
    /// Which layout a store has is decided in the same transaction: an existing store keeps its
    /// own (a key must match an encrypted one and is refused for a plain one); a new one is
    /// encrypted when a key is given. Returns the subkeys of an encrypted store. A refusal rolls
    /// the transaction back: the file is as it was.
    @discardableResult
    static func migrate(_ queue: DatabaseQueue, key: StoreKey? = nil, path: String = "") throws -> StoreCrypto? {
        try queue.writeWithoutTransaction { db in
            var crypto: StoreCrypto?
            try db.inTransaction(.immediate) {
                try db.execute(sql: "CREATE TABLE IF NOT EXISTS grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
                let found = try layout(db, key: key, path: path)
                let list: [(identifier: String, sql: String)]
                if found.sealed {
                    crypto = found.crypto
                    list = sealedMigrations
                } else if found.plain || !found.applied.isEmpty {
                    list = migrations
                } else if let key {
                    // A new store, made encrypted: its salt and key check first.
                    for m in sealedMigrations {
                        try db.execute(sql: m.sql)
                        try db.execute(
                            sql: "INSERT INTO grdb_migrations (identifier) VALUES (?)", arguments: [m.identifier])
                    }
                    let salt = [UInt8](SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) })
                    let c = key.derive(salt: salt)
                    try db.execute(
                        sql: "INSERT INTO store_key (id, salt, key_check) VALUES (1, ?, ?)",
                        arguments: [Data(salt), Data(c.keyCheck)])
                    crypto = c
                    return .commit
                } else {
                    list = migrations
                }
                for m in list where !found.applied.contains(m.identifier) {
                    try db.execute(sql: m.sql)
                    try db.execute(
                        sql: "INSERT INTO grdb_migrations (identifier) VALUES (?)", arguments: [m.identifier])
                }
                return .commit
            }
            return crypto
        }
    }

    /// What ``layout(_:key:path:)`` finds in a file.
    typealias Layout = (sealed: Bool, plain: Bool, hasTables: Bool, applied: Set<String>, crypto: StoreCrypto?)

    /// What an existing file holds: which layout (sealed, plain, or neither yet), the migrations
    /// applied, and for a sealed store the subkeys of `key`, checked against the store's key check.
    /// Reads only. Refuses a store written by a newer cuff, an encrypted store without its key, and a
    /// key for a plain store.
    static func layout(_ db: Database, key: StoreKey?, path: String) throws -> Layout {
        let tables = Set(
            try String.fetchAll(
                db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND typeof(name) = 'text'"))
        let applied =
            tables.contains("grdb_migrations")
            ? Set(
                try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations WHERE typeof(identifier) = 'text'")
            ) : []
        let known = Set(migrations.map(\.identifier) + sealedMigrations.map(\.identifier))
        if let unknown = applied.subtracting(known).sorted().first {
            throw DatabaseError(
                message:
                    "the store has schema migration \(unknown), which this cuff does not know: it was written by a newer cuff"
            )
        }
        let sealed = tables.contains("store_key")
        let plain = tables.contains("measurements")
        var crypto: StoreCrypto?
        if sealed {
            guard let key else {
                throw SinkError.storeKey(
                    path: path, reason: "is encrypted: give its key with --store-key-file PATH (or CUFF_STORE_KEY_FILE)"
                )
            }
            guard
                let row = try Row.fetchOne(
                    db,
                    sql:
                        "SELECT salt, key_check FROM store_key WHERE id = 1 AND typeof(salt) = 'blob' AND typeof(key_check) = 'blob'"
                ),
                let salt = row[0] as Data?, let check = row[1] as Data?
            else {
                throw SinkError.storeKey(
                    path: path, reason: "is encrypted but its key check is missing: the file was damaged")
            }
            let c = key.derive(salt: [UInt8](salt))
            guard c.keyCheck == [UInt8](check) else {
                throw SinkError.storeKey(
                    path: path, reason: "is encrypted with another key than the one in \(key.path)")
            }
            crypto = c
        } else if plain || !applied.isEmpty, let key {
            throw SinkError.storeKey(
                path: path,
                reason:
                    "is not encrypted, so it does not open with a key (\(key.path)); a key encrypts a new store only")
        }
        return (sealed, plain, !tables.subtracting(["grdb_migrations"]).isEmpty, applied, crypto)
    }

    /// The identifiers of the migrations applied to this store, in the order they were applied.
    func appliedMigrations() throws -> [String] {
        try db.read { try String.fetchAll($0, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid") }
    }

    // MARK: SampleSink

    /// Stores a measurement (committed and fsynced on return); other outputs are ignored.
    public func write(_ o: SessionOutput) throws(SinkError) {
        try done.check()
        guard case let .measurement(m) = o else { return }
        try insert(m)
    }

    /// Closes the database, the WAL checkpointed into it first.
    public func finish() throws(SinkError) {
        try done.finish()
        // (SQLite's own checkpoint at close is skipped for a file that was moved, and the next
        // store made at the path deletes the log: checkpointed explicitly, what it holds reaches
        // the file wherever it went.)
        if fileIdentity != nil { checkpointIntoFile() }
        do { try db.close() } catch { throw .storeOpen(path: path, reason: "close: " + SQLiteStore.describe(error)) }
    }

    /// Writes what the write-ahead log holds into the store file through the open connection (its
    /// descriptors follow the file if it was renamed, and the log's if it was removed), and
    /// empties the log. Probe D3: readings confirmed before `mv bp.db bp-archive.db` stayed in
    /// `bp.db-wal`, which SQLite does not checkpoint into a moved file at close; the restart
    /// the message asks for made a new `bp.db`, and SQLite deleted that log: all of them lost.
    func checkpointIntoFile() {
        _ = try? db.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
    }

    // MARK: Writing

    /// Stores `m` unless a row with its dedup key exists. Returns whether it was new.
    @discardableResult
    public func insert(_ m: MeasurementRecord) throws(SinkError) -> InsertOutcome {
        try done.check()
        try checkLinked(afterWrite: false, dedupKey: m.dedupKey)
        let q = quirks(for: m)
        let offset = utcOffset.offsetSeconds(m)
        let outcome: InsertOutcome
        do {
            outcome = try db.write { db in try insertRow(db, m, quirks: q, offset: offset) }
        } catch let e as SinkError {
            throw e
        } catch {
            throw .storeWrite(path: path, dedupKey: m.dedupKey, reason: SQLiteStore.describe(error))
        }
        try checkLinked(afterWrite: true, dedupKey: m.dedupKey)
        return outcome
    }

    /// Throws when the store file (or, after a write, its write-ahead log) is no longer the one
    /// opened at `path`: removed or replaced, it would keep taking readings, and confirming them,
    /// that are gone once the process ends. Checked before and after every write, so nothing is
    /// confirmed from then on (and no retry finds the reading "already kept" in the lost file).
    func checkLinked(afterWrite: Bool, dedupKey: String) throws(SinkError) {
        guard let id = fileIdentity else { return }
        let what: String?
        switch Sys.fileStatus(path) {
        case .success(let st) where UInt64(st.st_dev) == id.device && UInt64(st.st_ino) == id.inode:
            // (In WAL mode the log exists from the first write until the last connection closes.)
            if afterWrite, case .failure(let e) = Sys.fileStatus(path + "-wal"), e == .noSuchFileOrDirectory {
                what = "its write-ahead log \(path)-wal was removed"
            } else {
                what = nil
            }
        case .success: what = "the file was replaced"
        case .failure(let e): what = "the file is gone (\(e))"
        }
        guard let what else { return }
        // What was kept so far goes into the file (wherever it went) now, not at a close that
        // may never come (kill -9) or that skips it.
        checkpointIntoFile()
        throw .storeWrite(
            path: path, dedupKey: dedupKey,
            reason:
                "\(what) while cuff had the store open: what it takes now would be lost, so nothing more is kept or confirmed (what was kept before is in the file that was at the path); restart cuff (it makes the store anew)"
        )
    }

    /// Stores every record of `ms` in one transaction (one commit, one fsync): a bulk load. Returns
    /// how many were new.
    @discardableResult
    public func insert(contentsOf ms: [MeasurementRecord]) throws(SinkError) -> Int {
        try done.check()
        try checkLinked(afterWrite: false, dedupKey: ms.first?.dedupKey ?? "-")
        let prepared = ms.map { ($0, quirks(for: $0), utcOffset.offsetSeconds($0)) }
        let n: Int
        do {
            n = try db.write { db in
                var n = 0
                for (m, q, o) in prepared where try insertRow(db, m, quirks: q, offset: o).isNew { n += 1 }
                return n
            }
        } catch let e as SinkError {
            throw e
        } catch {
            throw .storeWrite(path: path, dedupKey: ms.first?.dedupKey ?? "-", reason: SQLiteStore.describe(error))
        }
        try checkLinked(afterWrite: true, dedupKey: ms.first?.dedupKey ?? "-")
        return n
    }

    /// One measurement's rows, in the caller's transaction: sealed in an encrypted store, else the
    /// device upsert and the measurement's columns.
    func insertRow(_ db: Database, _ m: MeasurementRecord, quirks: QuirkProfile.Options, offset: Int) throws
        -> InsertOutcome
    {
        if let crypto {
            // Sealed with the key the store was opened with, which must still be the store's: a
            // `cuff key rotate` since then re-sealed every row under another (probe X: a reading
            // stored after it was sealed with the old key, and no key opened the store any more).
            // Read in this transaction: a rotation commits before it (seen here) or after it (and
            // then re-seals this row too).
            let check = try Data.fetchOne(db.cachedStatement(sql: "SELECT key_check FROM store_key WHERE id = 1"))
            guard let check, [UInt8](check) == crypto.keyCheck else {
                throw SinkError.storeWrite(
                    path: path, dedupKey: m.dedupKey,
                    reason:
                        "its key was changed (cuff key rotate) while cuff had it open: nothing more is kept or confirmed with the old key; restart cuff with the new key"
                )
            }
            let row = SealedRow(m, quirks: quirks, hostUTCOffsetSeconds: offset)
            let tag = crypto.tag(m.dedupKey)
            let sealed = try crypto.seal(Array(try JSONEncoder().encode(row)), tag: tag)
            try db.cachedStatement(
                sql:
                    "INSERT INTO sealed_measurements (dedup_tag, sealed) VALUES (?, ?) ON CONFLICT(dedup_tag) DO NOTHING"
            )
            .execute(arguments: [Data(tag), Data(sealed)])
            return db.changesCount > 0 ? .inserted(rowID: db.lastInsertedRowID) : .duplicate
        }
        func num(_ s: SFloat?) -> Double? { s?.doubleValue }
        func word(_ s: SFloat?) -> Int64? { s.map { Int64($0.rawValue) } }
        let d = m.device
        // Cached statements (prepared once per connection): preparing these three statements again
        // for every row was half of `cuff watch`'s CPU per reading under callgrind (SQLite's
        // parser and GRDB's authorizer, about 490,000 instructions a reading).
        try db.cachedStatement(
            sql: """
                INSERT INTO devices (identity, address, name, manufacturer, model, serial, firmware)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(identity) DO UPDATE SET
                    address = excluded.address,
                    name = coalesce(excluded.name, name),
                    manufacturer = coalesce(excluded.manufacturer, manufacturer),
                    model = coalesce(excluded.model, model),
                    serial = coalesce(excluded.serial, serial),
                    firmware = coalesce(excluded.firmware, firmware)
                """
        )
        .execute(arguments: [d.identity, d.address, d.name, d.manufacturer, d.model, d.serial, d.firmware])
        guard
            let deviceID = try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT id FROM devices WHERE identity = ?"), arguments: [d.identity])
        else {
            throw DatabaseError(message: "device row missing after upsert")
        }
        // ON CONFLICT on the dedup key only: other constraint failures are errors, not "duplicates".
        try db.cachedStatement(
            sql: """
                INSERT INTO measurements (\(StoreSchema.measurementColumnList))
                VALUES (?, ?, ?, ?, ?,  ?, ?, ?, ?,  ?, ?, ?, ?,  ?, ?, ?, ?,  ?, ?, ?, ?, ?,  ?, ?, ?, ?, ?, ?)
                ON CONFLICT(dedup_key) DO NOTHING
                """
        )
        .execute(
            arguments: StatementArguments(
                [
                    deviceID, m.characteristic.uuidString, Data(m.raw), Int64(quirks.rawValue), m.unit.rawValue,
                    num(m.systolic), num(m.diastolic), num(m.meanArterialPressure), num(m.pulseRate),
                    word(m.systolic), word(m.diastolic), word(m.meanArterialPressure), word(m.pulseRate),
                    m.systolic.specialName, m.diastolic.specialName, m.meanArterialPressure.specialName,
                    m.pulseRate?.specialName,
                    m.timestamp, m.userID.map { Int64($0) }, m.status.map { Int64($0.rawValue) }, m.stored,
                    m.sequenceNumber.map { Int64($0) },
                    m.receivedAt.iso8601, m.receivedAt.wallMicros, Int64(offset), m.dedupKey,
                    m.warnings.isEmpty ? "[]" : m.warnings.json.serialized(),
                    decodedText.decodedText(of: m),
                ] as [(any DatabaseValueConvertible)?]))
        return db.changesCount > 0 ? .inserted(rowID: db.lastInsertedRowID) : .duplicate
    }

    /// The quirk options that reproduce `m` from its raw bytes (none, with a warning, when no set does).
    func quirks(for m: MeasurementRecord) -> QuirkProfile.Options {
        if let q = SQLiteStore.reproducingOptions(m) { return q }
        warn(
            SinkWarning(
                sink: "store",
                message:
                    "the record's decoded values do not match its raw bytes under any quirk profile; history will decode the raw bytes without quirks",
                dedupKey: m.dedupKey))
        return []
    }

    /// Every sealed row opened, in received order; a row that does not authenticate (or holds
    /// anything but its two BLOBs) is skipped, named in ``StoreReading/skipped``: it was changed.
    func openedRows() throws(SinkError) -> StoreReading {
        guard let crypto else { return StoreReading(rows: []) }
        let rows: [Row]
        do {
            rows = try db.read {
                try Row.fetchAll($0, sql: "SELECT rowid, dedup_tag, sealed FROM sealed_measurements ORDER BY rowid")
            }
        } catch {
            throw .storeRead(path: path, reason: SQLiteStore.describe(error))
        }
        var out: [StoredMeasurement] = []
        var skipped: [StoreRowProblem] = []
        out.reserveCapacity(rows.count)
        // A device's names as the plain store keeps them: one per identity, each field the latest
        // one learned (a later row without a name keeps the earlier name).
        var devices: [String: DeviceInfo] = [:]
        let decoder = JSONDecoder()
        for r in rows {
            let id = Int64.fromDatabaseValue(r[0] as DatabaseValue) ?? -1
            guard case let .blob(tag) = (r[1] as DatabaseValue).storage,
                case let .blob(box) = (r[2] as DatabaseValue).storage,
                let plain = crypto.open([UInt8](box), tag: [UInt8](tag)),
                let sealed = try? decoder.decode(SealedRow.self, from: Data(plain))
            else {
                // (The key opened the store: its key check matched. One row that does not open was
                // changed or damaged; it is skipped, named, as a plain store's unreadable row is,
                // and the rest is read. Probe X: one flipped byte hid the whole history.)
                skipped.append(StoreRowProblem(rowID: id, column: "sealed", kind: .doesNotAuthenticate))
                continue
            }
            let s = sealed.stored(id: id)
            let identity = s.device.identity
            if var d = devices[identity] {
                d.address = s.device.address
                d.name = s.device.name ?? d.name
                d.manufacturer = s.device.manufacturer ?? d.manufacturer
                d.model = s.device.model ?? d.model
                d.serial = s.device.serial ?? d.serial
                d.firmware = s.device.firmware ?? d.firmware
                devices[identity] = d
            } else {
                devices[identity] = s.device
            }
            out.append(s)
        }
        for i in out.indices { out[i].device = devices[out[i].device.identity] ?? out[i].device }
        out.sort { ($0.receivedAtMicros, $0.id) < ($1.receivedAtMicros, $1.id) }
        return StoreReading(rows: out, skipped: skipped)
    }

    /// Re-seals every row of the encrypted store at `path` under `newKey`, in one transaction: a
    /// crash or kill at any point leaves the store as the old key or the new one opens it.
    /// Returns how many rows were sealed again.
    @discardableResult
    public static func rotateKey(path: String, from oldKey: StoreKey, to newKey: StoreKey) throws(SinkError) -> Int {
        let store = try SQLiteStore(path: path, mustExist: true, key: oldKey, warn: SinkWarnings.ignore)
        guard let old = store.crypto else { throw .storeKey(path: path, reason: "is not encrypted") }
        do {
            let n = try store.db.write { db -> Int in
                let salt = [UInt8](SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) })
                let new = newKey.derive(salt: salt)
                let rows = try Row.fetchAll(
                    db, sql: "SELECT id, dedup_tag, sealed FROM sealed_measurements ORDER BY id")
                // New tags are set on rows whose old tags are still there: move them out of the way first.
                try db.execute(sql: "UPDATE sealed_measurements SET dedup_tag = X'00' || dedup_tag")
                for r in rows {
                    let id = Int64.fromDatabaseValue(r["id"] as DatabaseValue) ?? -1
                    guard case let .blob(oldTag) = (r["dedup_tag"] as DatabaseValue).storage,
                        case let .blob(box) = (r["sealed"] as DatabaseValue).storage,
                        let plain = old.open([UInt8](box), tag: [UInt8](oldTag)),
                        let row = try? JSONDecoder().decode(SealedRow.self, from: Data(plain))
                    else { throw SinkError.storeTampered(path: path, rowID: id) }
                    let tag = new.tag(row.dedupKey)
                    try db.execute(
                        sql: "UPDATE sealed_measurements SET dedup_tag = ?, sealed = ? WHERE id = ?",
                        arguments: [Data(tag), Data(try new.seal(plain, tag: tag)), id])
                }
                try db.execute(
                    sql: "UPDATE store_key SET salt = ?, key_check = ? WHERE id = 1",
                    arguments: [Data(salt), Data(new.keyCheck)])
                return rows.count
            }
            try store.finish()
            return n
        } catch let e as SinkError {
            throw e
        } catch {
            throw .storeWrite(path: path, dedupKey: "(key rotation)", reason: SQLiteStore.describe(error))
        }
    }

    /// The codec options under which `m.raw` decodes to `m.decoded` (none, or a quirk profile's),
    /// or nil when no option set reproduces it.
    ///
    /// A record made by the codec (``MeasurementRecord/codecValue``) is first compared value for
    /// value: the same value and warnings write the same JSON, without building either tree (the
    /// two trees cost about 100,000 instructions a reading under callgrind). Only when the values
    /// differ are the JSON objects compared.
    static func reproducingOptions(_ m: MeasurementRecord) -> QuirkProfile.Options? {
        switch m.characteristic {
        case .bloodPressureMeasurement:
            let made = m.codecValue
            var expected: JSON?
            var rawJSON: JSON?
            for o in [QuirkProfile.Options()] + QuirkProfile.all.map(\.options) {
                guard let d = try? BloodPressureMeasurement.decode(m.raw[...], quirks: o) else { continue }
                if case let .bpm(v)? = made, v == d.value, m.warnings == d.warnings { return o }
                if rawJSON == nil { rawJSON = JSON.string(Hex.encode(m.raw)) }
                if expected == nil { expected = m.decoded }
                if d.value.json(as: .bloodPressureMeasurement, warnings: d.warnings, raw: rawJSON!) == expected! {
                    return o
                }
            }
            return nil
        case .enhancedBloodPressureMeasurement, .bloodPressureRecord:
            guard let d = try? EnhancedBloodPressureMeasurement.decode(m.raw[...], cuffPressure: false) else {
                return nil
            }
            if case let .enhanced(v)? = m.codecValue, v == d.value, m.warnings == d.warnings { return [] }
            return d.value.json(warnings: d.warnings, raw: JSON.string(Hex.encode(m.raw))) == m.decoded ? [] : nil
        default:
            // Another protocol's record: no BPS quirk applies (its protocol decodes it again).
            return m.characteristic.bps == nil ? [] : nil
        }
    }

    // MARK: Reading

    /// Every stored measurement, in received order (then insertion order). A row that cannot be
    /// read is an error naming it (``readHistory()`` skips such rows instead).
    public func history() throws(SinkError) -> [StoredMeasurement] {
        let r = try readHistory()
        if let p = r.skipped.first { throw .storeRead(path: path, reason: p.description) }
        return r.rows
    }

    /// Every stored measurement that can be read, in received order (then insertion order), and
    /// the rows that cannot (named by row id and column, never by value). Every cell is read as what
    /// it is, whatever its column's declared type: a damaged store never traps. A measurement whose
    /// device row is missing is read with an unknown device.
    public func readHistory() throws(SinkError) -> StoreReading {
        guard hasTables else { return StoreReading(rows: []) }
        if crypto != nil { return try openedRows() }
        do {
            return try db.read { db in
                try SQLiteStore.readRows(db, sql: StoreRows.historySQL(deviceColumns: SQLiteStore.deviceColumns(db)))
            }
        } catch {
            throw .storeRead(path: path, reason: SQLiteStore.describe(error))
        }
    }

    /// The columns the store's `devices` table has (lowercased).
    static func deviceColumns(_ db: Database) throws -> Set<String> {
        Set(try String.fetchAll(db, sql: "SELECT name FROM pragma_table_info('devices')").map { $0.lowercased() })
    }

    /// The rows of a ``StoreRows`` query, each decoded by ``StoreRows/decode(_:_:)``.
    static func readRows(_ db: Database, sql: String, arguments: StatementArguments = StatementArguments()) throws
        -> StoreReading
    {
        let rows = try Row.fetchCursor(db, sql: sql, arguments: arguments)
        var layout: StoreRows.Layout?
        var out = StoreReading(rows: [])
        while let row = try rows.next() {
            let l = layout ?? StoreRows.Layout(columnNames: Array(row.columnNames))
            layout = l
            do throws(StoreRowProblem) {
                let d = try StoreRows.decode(l, (0..<row.count).map { StoreValue(row[$0] as DatabaseValue) })
                out.rows.append(d.measurement)
                if d.deviceRowMissing { out.withoutDevice += 1 }
            } catch {
                out.skipped.append(error)
            }
        }
        return out
    }

    /// The dedup keys of every stored measurement (for the session's `knownRecordKeys`).
    public func knownKeys() throws(SinkError) -> Set<String> {
        if crypto != nil { return Set(try openedRows().rows.map(\.dedupKey)) }
        do {
            // A damaged key (not text) is no key this cuff could have written.
            return try db.read {
                Set(try String.fetchAll($0, sql: "SELECT dedup_key FROM measurements WHERE typeof(dedup_key) = 'text'"))
            }
        } catch {
            throw .storeRead(path: path, reason: SQLiteStore.describe(error))
        }
    }

    /// The highest BPS 1.1 record sequence number stored for the device last seen at `address`
    /// (for the session's `lastSequenceNumber`), or nil when none is stored.
    public func lastSequenceNumber(address: String) throws(SinkError) -> UInt16? {
        if crypto != nil {
            return try openedRows().rows.filter { $0.device.address == address }.compactMap(\.sequenceNumber).max()
        }
        do {
            let v = try db.read {
                try Int64.fetchOne(
                    $0,
                    sql: """
                        SELECT max(m.sequence_number) FROM measurements m JOIN devices d ON d.id = m.device_id
                        WHERE d.address = ? AND typeof(m.sequence_number) = 'integer'
                        """,
                    arguments: [address])
            }
            return v.flatMap { UInt16(exactly: $0) }
        } catch {
            throw .storeRead(path: path, reason: SQLiteStore.describe(error))
        }
    }

    /// A PRAGMA's current value as text (for checks and tests).
    func pragma(_ name: String) throws -> String? {
        try db.read { try String.fetchOne($0, sql: "PRAGMA " + name) }
    }

    static func describe(_ error: any Error) -> String {
        if let e = error as? SinkError { return e.description }
        if let e = error as? DatabaseError { return e.message.map { "\(e.resultCode): \($0)" } ?? "\(e.resultCode)" }
        return String(describing: error)
    }
}

/// What an encrypted store seals for one measurement: every column of the plain layout, and the device.
struct SealedRow: Codable {
    var characteristic: String
    var raw: String
    var quirks: UInt8
    var unit: String
    var systolic, diastolic, meanArterialPressure, pulseRate: Double?
    var systolicRaw, diastolicRaw, meanArterialPressureRaw: UInt16
    var pulseRateRaw: UInt16?
    var systolicSpecial, diastolicSpecial, meanArterialPressureSpecial, pulseRateSpecial: String?
    var timestamp: String?
    var userID: UInt8?
    var status: UInt16?
    var stored: Bool
    var sequenceNumber: UInt16?
    var receivedAt: String
    var receivedAtMicros: Int64
    var hostUTCOffsetSeconds: Int
    var dedupKey: String
    var warnings: String
    var decoded: String
    var address: String
    var name, manufacturer, model, serial, firmware: String?

    init(_ m: MeasurementRecord, quirks: QuirkProfile.Options, hostUTCOffsetSeconds: Int) {
        characteristic = m.characteristic.uuidString
        raw = Hex.encode(m.raw)
        self.quirks = quirks.rawValue
        unit = m.unit.rawValue
        systolic = m.systolic.doubleValue
        diastolic = m.diastolic.doubleValue
        meanArterialPressure = m.meanArterialPressure.doubleValue
        pulseRate = m.pulseRate?.doubleValue
        systolicRaw = m.systolic.rawValue
        diastolicRaw = m.diastolic.rawValue
        meanArterialPressureRaw = m.meanArterialPressure.rawValue
        pulseRateRaw = m.pulseRate?.rawValue
        systolicSpecial = m.systolic.specialName
        diastolicSpecial = m.diastolic.specialName
        meanArterialPressureSpecial = m.meanArterialPressure.specialName
        pulseRateSpecial = m.pulseRate?.specialName
        timestamp = m.timestamp
        userID = m.userID
        status = m.status?.rawValue
        stored = m.stored
        sequenceNumber = m.sequenceNumber
        receivedAt = m.receivedAt.iso8601
        receivedAtMicros = m.receivedAt.wallMicros
        self.hostUTCOffsetSeconds = hostUTCOffsetSeconds
        dedupKey = m.dedupKey
        warnings = m.warnings.json.serialized()
        decoded = m.decoded.serialized()
        address = m.device.address
        name = m.device.name
        manufacturer = m.device.manufacturer
        model = m.device.model
        serial = m.device.serial
        firmware = m.device.firmware
    }

    func stored(id: Int64) -> StoredMeasurement {
        StoredMeasurement(
            id: id,
            device: DeviceInfo(
                address: address, name: name, manufacturer: manufacturer, model: model, serial: serial,
                firmware: firmware),
            characteristic: RecordCharacteristic(argument: characteristic) ?? .bloodPressureMeasurement,
            raw: Hex.decode(raw) ?? [],
            quirks: QuirkProfile.Options(rawValue: quirks), unit: PressureUnit(rawValue: unit) ?? .mmHg,
            systolic: systolic,
            diastolic: diastolic, meanArterialPressure: meanArterialPressure, pulseRate: pulseRate,
            systolicRaw: systolicRaw,
            diastolicRaw: diastolicRaw, meanArterialPressureRaw: meanArterialPressureRaw, pulseRateRaw: pulseRateRaw,
            systolicSpecial: systolicSpecial, diastolicSpecial: diastolicSpecial,
            meanArterialPressureSpecial: meanArterialPressureSpecial,
            pulseRateSpecial: pulseRateSpecial, timestamp: timestamp, userID: userID, status: status, stored: stored,
            sequenceNumber: sequenceNumber, receivedAt: receivedAt, receivedAtMicros: receivedAtMicros,
            hostUTCOffsetSeconds: hostUTCOffsetSeconds, dedupKey: dedupKey, warningsJSON: warnings, decodedJSON: decoded
        )
    }
}

extension StoreValue {
    /// A cell as GRDB holds it.
    init(_ v: DatabaseValue) {
        switch v.storage {
        case .null: self = .null
        case let .int64(i): self = .integer(i)
        case let .double(d): self = .real(d)
        case let .string(s): self = .text(s)
        case let .blob(b): self = .blob([UInt8](b))
        }
    }
}
