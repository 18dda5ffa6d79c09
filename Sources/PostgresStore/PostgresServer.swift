// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import Dispatch
import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import Sinks
import Synchronization
import StoreFormat

/// A result handed from the event loop to the waiting thread.
final class ResultBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<T, any Error>?
    func set(_ r: Result<T, any Error>) { lock.lock(); result = r; lock.unlock() }
    func get() -> Result<T, any Error>? { lock.lock(); defer { lock.unlock() }; return result }
}

/// Why the server could not be used, and whether trying again later may help.
public struct PostgresStoreError: Error, Sendable, CustomStringConvertible {
    public var server: String
    public var message: String
    /// False for what only a change of configuration fixes (bad URL, password, database, TLS,
    /// a schema from a newer cuff); true for an unreachable server or a dropped connection.
    public var transient: Bool
    public var description: String { "PostgreSQL \(server): \(message)" }
}

/// One blocking connection to the PostgreSQL server of a `postgres://` URL: the schema, shipping a
/// batch of rows in one transaction, and reading them back. The event loop (one thread) and its
/// futures stay inside; callers block on a thread that is not the loop's (the CLI's, the shipper's).
public final class PostgresServer: Sendable {
    public let url: PostgresURL
    let group: MultiThreadedEventLoopGroup
    let logger = Logger(label: "cuff.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
    private let state = Mutex<PostgresConnection?>(nil)
    private let nextID = Atomic<Int>(1)
    /// Set by ``interrupt()``: every wait ends at once, and none starts.
    private let interrupted = Atomic<Bool>(false)

    public init(url: PostgresURL) {
        self.url = url
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    }

    deinit { try? group.syncShutdownGracefully() }

    // MARK: Schema

    /// The schema's migrations, oldest first: a version and its statements. Tables are prefixed
    /// `cuff_` so that a database can hold other things too. The tables are StoreFormat's
    /// ``StoreSchema`` (the SQLite store's columns, and `shipped_at`); `dedup_key` is unique, so a
    /// reading is kept once whoever ships it.
    static let migrations: [(version: Int, name: String, statements: [String])] = [
        (1, "devices and measurements", StoreSchema.statements(.postgres, prefix: "cuff_"))
    ]

    /// The advisory lock every cuff takes while it migrates (any constant; "cuff" in ASCII).
    static let migrationLock: Int64 = 0x6375_6666

    /// Brings the schema up to date. Safe when several hubs start at once: the check and the
    /// migrations run in one transaction holding `pg_advisory_xact_lock`, so one hub creates the
    /// tables and the others, waiting for the lock, then find them made. A schema with a version
    /// this cuff does not know is refused (it was made by a newer cuff).
    /// A schema already up to date is only read: a role that may use the tables but not create
    /// any (no CREATE on the schema) can write readings.
    public func migrate() throws(PostgresStoreError) {
        try withConnection { c in
            try run(c, "BEGIN")
            do {
                try run(c, "SELECT pg_advisory_xact_lock(\(Self.migrationLock))")
                let applied: Set<Int>
                if let versions = try appliedVersions(c) {
                    applied = versions
                } else {
                    try run(
                        c,
                        """
                        CREATE TABLE cuff_schema_migrations (
                            version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())
                        """)
                    applied = []
                }
                for m in Self.migrations where !applied.contains(m.version) {
                    for s in m.statements { try run(c, s) }
                    var b = PostgresBindings()
                    b.append(m.version)
                    b.append(m.name)
                    try run(
                        c,
                        PostgresQuery(
                            unsafeSQL: "INSERT INTO cuff_schema_migrations (version, name) VALUES ($1, $2)", binds: b))
                }
                try run(c, "COMMIT")
            } catch {
                _ = try? run(c, "ROLLBACK")
                throw error
            }
        }
    }

    /// The schema versions applied, nil when the database has no cuff schema (nothing is
    /// created). A version this cuff does not know is refused (a newer cuff made it).
    func appliedVersions(_ c: PostgresConnection) throws -> Set<Int>? {
        let exists = try run(c, "SELECT to_regclass('cuff_schema_migrations') IS NOT NULL").rows.first
        guard let exists, try exists.decode(Bool.self) else { return nil }
        let applied = Set(try run(c, "SELECT version FROM cuff_schema_migrations").rows.map { try $0.decode(Int.self) })
        if let newer = applied.subtracting(Set(Self.migrations.map(\.version))).max() {
            throw PostgresStoreError(
                server: url.serverName,
                message:
                    "the database has cuff schema version \(newer), which this cuff does not know: it was made by a newer cuff",
                transient: false)
        }
        return applied
    }

    /// Whether the database has cuff's tables, checked without writing (`cuff history`): false for
    /// a database no cuff has written to; a schema a newer cuff made is refused.
    public func hasSchema() throws(PostgresStoreError) -> Bool {
        try withConnection { c in try appliedVersions(c).map { !$0.isEmpty } ?? false }
    }

    /// The schema versions applied, in order (for tests).
    public func appliedMigrations() throws(PostgresStoreError) -> [Int] {
        try withConnection { c in
            try run(c, "SELECT version FROM cuff_schema_migrations ORDER BY version").rows.map {
                try $0.decode(Int.self)
            }
        }
    }

    // MARK: Writing

    /// Ships `rows` (from an outbox) in one transaction: the devices upserted as the SQLite store
    /// does, then every measurement with `ON CONFLICT (dedup_key) DO NOTHING`. Returns how many
    /// were new. When this returns, the server has committed them all.
    @discardableResult
    public func ship(_ rows: [StoredMeasurement]) throws(PostgresStoreError) -> Int {
        guard !rows.isEmpty else { return 0 }
        // One upsert per device: its address the last row's, each name the last one given
        // (what a row-by-row upsert with coalesce leaves). Sorted, so that two hubs shipping the
        // same devices lock them in the same order.
        var devices: [String: DeviceInfo] = [:]
        for r in rows {
            let id = r.device.identity
            if var d = devices[id] {
                d.address = r.device.address
                d.name = r.device.name ?? d.name
                d.manufacturer = r.device.manufacturer ?? d.manufacturer
                d.model = r.device.model ?? d.model
                d.serial = r.device.serial ?? d.serial
                d.firmware = r.device.firmware ?? d.firmware
                devices[id] = d
            } else {
                devices[id] = r.device
            }
        }
        return try withConnection { c in
            try run(c, "BEGIN")
            do {
                var deviceIDs: [String: Int64] = [:]
                for identity in devices.keys.sorted() {
                    let d = devices[identity]!
                    var b = PostgresBindings()
                    b.append(identity)
                    b.append(d.address)
                    b.append(d.name)
                    b.append(d.manufacturer)
                    b.append(d.model)
                    b.append(d.serial)
                    b.append(d.firmware)
                    let r = try run(
                        c,
                        PostgresQuery(
                            unsafeSQL: """
                                INSERT INTO cuff_devices (identity, address, name, manufacturer, model, serial, firmware)
                                VALUES ($1, $2, $3, $4, $5, $6, $7)
                                ON CONFLICT (identity) DO UPDATE SET
                                    address = EXCLUDED.address,
                                    name = coalesce(EXCLUDED.name, cuff_devices.name),
                                    manufacturer = coalesce(EXCLUDED.manufacturer, cuff_devices.manufacturer),
                                    model = coalesce(EXCLUDED.model, cuff_devices.model),
                                    serial = coalesce(EXCLUDED.serial, cuff_devices.serial),
                                    firmware = coalesce(EXCLUDED.firmware, cuff_devices.firmware)
                                RETURNING id
                                """, binds: b))
                    guard let row = r.rows.first else {
                        throw PostgresStoreError(
                            server: url.serverName, message: "device upsert returned no id", transient: true)
                    }
                    deviceIDs[identity] = try row.decode(Int64.self)
                }
                // The batch as one JSON parameter, unpacked by the server (jsonb_to_recordset): one
                // statement to parse and plan however many rows (a VALUES list has 28 parameters a
                // row, and the protocol allows 65535).
                var b = PostgresBindings()
                b.append(Self.batchJSON(rows, deviceIDs: deviceIDs))
                let r = try run(
                    c,
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO cuff_measurements (\(StoreSchema.measurementColumnList))
                            SELECT d, c, decode(r, 'hex'), q, u, sy, di, ma, pr, syr, dir, mar, prr, sys, dis, mas, prs,
                                   ts, uid, st, sto, seq, ra, rus, off, k, w, dec
                            FROM jsonb_to_recordset($1::jsonb) AS x(
                                d BIGINT, c TEXT, r TEXT, q INTEGER, u TEXT, sy FLOAT8, di FLOAT8, ma FLOAT8, pr FLOAT8,
                                syr INTEGER, dir INTEGER, mar INTEGER, prr INTEGER, sys TEXT, dis TEXT, mas TEXT, prs TEXT,
                                ts TEXT, uid INTEGER, st INTEGER, sto BOOLEAN, seq INTEGER, ra TEXT, rus BIGINT, off INTEGER,
                                k TEXT, w TEXT, dec TEXT)
                            ON CONFLICT (dedup_key) DO NOTHING
                            """, binds: b))
                let inserted = r.metadata.rows ?? 0
                try run(c, "COMMIT")
                return inserted
            } catch {
                _ = try? run(c, "ROLLBACK")
                throw error
            }
        }
    }

    /// `rows` as a JSON array of objects with short keys (see ``ship(_:)``'s column list).
    static func batchJSON(_ rows: [StoredMeasurement], deviceIDs: [String: Int64]) -> String {
        var o = ""
        o.reserveCapacity(rows.count * 900)
        func str(_ s: String) {
            // PostgreSQL's text holds no NUL: the replacement character stands for it.
            JSONEscape.quote(
                s.contains("\u{0}")
                    ? String(String.UnicodeScalarView(s.unicodeScalars.map { $0 == "\u{0}" ? "\u{FFFD}" : $0 })) : s,
                into: &o)
        }
        func key(_ k: String) { o += ",\"" + k + "\":" }
        func optStr(_ k: String, _ s: String?) { key(k); if let s { str(s) } else { o += "null" } }
        func num(_ k: String, _ d: Double?) {
            key(k)
            if let d, d.isFinite { o += "\(d)" } else { o += "null" }
        }
        func int(_ k: String, _ i: Int64?) { key(k); o += i.map { String($0) } ?? "null" }
        o += "["
        for (n, m) in rows.enumerated() {
            o += n == 0 ? "{\"d\":" : ",{\"d\":"
            o += String(deviceIDs[m.device.identity]!)
            optStr("c", m.characteristic.uuidString)
            optStr("r", Hex.encode(m.raw))
            int("q", Int64(m.quirks.rawValue))
            optStr("u", m.unit.rawValue)
            num("sy", m.systolic)
            num("di", m.diastolic)
            num("ma", m.meanArterialPressure)
            num("pr", m.pulseRate)
            int("syr", Int64(m.systolicRaw))
            int("dir", Int64(m.diastolicRaw))
            int("mar", Int64(m.meanArterialPressureRaw))
            int("prr", m.pulseRateRaw.map { Int64($0) })
            optStr("sys", m.systolicSpecial)
            optStr("dis", m.diastolicSpecial)
            optStr("mas", m.meanArterialPressureSpecial)
            optStr("prs", m.pulseRateSpecial)
            optStr("ts", m.timestamp)
            int("uid", m.userID.map { Int64($0) })
            int("st", m.status.map { Int64($0) })
            key("sto")
            o += m.stored ? "true" : "false"
            int("seq", m.sequenceNumber.map { Int64($0) })
            optStr("ra", m.receivedAt)
            int("rus", m.receivedAtMicros)
            int("off", Int64(m.hostUTCOffsetSeconds))
            optStr("k", m.dedupKey)
            optStr("w", m.warningsJSON)
            optStr("dec", m.decodedJSON)
            o += "}"
        }
        o += "]"
        return o
    }

    // MARK: Reading

    /// Every measurement, in received order (then shipping order), as ``StoredMeasurement``s that
    /// decode to the records an SQLite store with the same readings gives. A row that cannot be
    /// read is an error naming it (``readHistory()`` skips such rows instead).
    public func history() throws(PostgresStoreError) -> [StoredMeasurement] {
        let r = try readHistory()
        if let p = r.skipped.first {
            throw PostgresStoreError(
                server: url.serverName, message: "cuff_measurements: \(p.description)", transient: false)
        }
        return r.rows
    }

    /// Every measurement the server holds that can be read, and the rows that cannot (named by id
    /// and column, never by value): each cell is taken as what it is on the wire and checked by
    /// ``StoreRows``, as the SQLite store's rows are, so one row that another program changed, or a
    /// column whose type was altered, skips that row and not the whole history.
    public func readHistory() throws(PostgresStoreError) -> StoreReading {
        try withConnection { c in
            // Only the device columns the table has (one dropped by another program leaves its
            // rows readable, or skipped naming it, as in an SQLite store), resolved as the query's
            // table name is (search_path).
            let columns = try run(
                c,
                """
                SELECT attname::TEXT FROM pg_attribute
                WHERE attrelid = to_regclass('cuff_devices') AND attnum > 0 AND NOT attisdropped
                """
            ).rows.map { try $0.decode(String.self) }
            let r = try run(
                c,
                StoreRows.historySQL(
                    deviceColumns: Set(columns.map { $0.lowercased() }), measurements: "cuff_measurements",
                    devices: "cuff_devices", rowID: "m.id"))
            var out = StoreReading(rows: [])
            var layout: StoreRows.Layout?
            for row in r.rows {
                let cells = Array(row)
                let l = layout ?? StoreRows.Layout(columnNames: cells.map(\.columnName))
                layout = l
                do throws(StoreRowProblem) {
                    let d = try StoreRows.decode(l, cells.map(Self.storeValue))
                    out.rows.append(d.measurement)
                    if d.deviceRowMissing { out.withoutDevice += 1 }
                } catch {
                    out.skipped.append(error)
                }
            }
            return out
        }
    }

    /// A cell as the storage class ``StoreRows`` checks: integers (and booleans, as 0 or 1),
    /// numbers, text, bytes; a type this schema never has is bytes, which no column takes.
    static func storeValue(_ cell: PostgresCell) -> StoreValue {
        guard let bytes = cell.bytes else { return .null }
        switch cell.dataType {
        case .int2, .int4, .int8:
            if let v = try? cell.decode(Int64.self) { return .integer(v) }
        case .float4, .float8, .numeric:
            if let v = try? cell.decode(Double.self) { return .real(v) }
        case .bool:
            if let v = try? cell.decode(Bool.self) { return .integer(v ? 1 : 0) }
        case .text, .varchar, .bpchar, .name:
            if let v = try? cell.decode(String.self) { return .text(v) }
        default:
            break
        }
        return .blob(Array(bytes.readableBytesView))
    }

    /// The dedup keys of every measurement on the server.
    public func knownKeys() throws(PostgresStoreError) -> Set<String> {
        try withConnection { c in
            Set(try run(c, "SELECT dedup_key FROM cuff_measurements").rows.map { try $0.decode(String.self) })
        }
    }

    /// ``lastSequenceNumber(address:)`` of every address the server holds readings of, in one query.
    public func lastSequenceNumbers() throws(PostgresStoreError) -> [String: UInt16] {
        try withConnection { c in
            var marks: [String: UInt16] = [:]
            let r = try run(
                c,
                """
                SELECT d.address, max(m.sequence_number)::BIGINT FROM cuff_measurements m
                JOIN cuff_devices d ON d.id = m.device_id
                WHERE m.sequence_number IS NOT NULL GROUP BY d.address
                """)
            for row in r.rows {
                let (address, n) = try row.decode((String, Int64?).self)
                if let n = n.flatMap({ UInt16(exactly: $0) }) { marks[address] = n }
            }
            return marks
        }
    }

    /// The server process serving this connection (`pg_backend_pid()`; for the benchmark).
    public func backendPID() throws(PostgresStoreError) -> Int32 {
        try withConnection { c in
            try run(c, "SELECT pg_backend_pid()").rows.first.map { try $0.decode(Int32.self) } ?? -1
        }
    }

    /// How many measurements the server holds.
    public func count() throws(PostgresStoreError) -> Int {
        try withConnection { c in
            try run(c, "SELECT count(*) FROM cuff_measurements").rows.first.map { try $0.decode(Int64.self) }.map(
                Int.init) ?? 0
        }
    }

    /// The highest record sequence number for the device last seen at `address`.
    public func lastSequenceNumber(address: String) throws(PostgresStoreError) -> UInt16? {
        try withConnection { c in
            var b = PostgresBindings()
            b.append(address)
            let r = try run(
                c,
                PostgresQuery(
                    unsafeSQL: """
                        SELECT max(m.sequence_number)::BIGINT FROM cuff_measurements m JOIN cuff_devices d ON d.id = m.device_id
                        WHERE d.address = $1
                        """, binds: b))
            return try r.rows.first.flatMap { try $0.decode(Int64?.self) }.flatMap { UInt16(exactly: $0) }
        }
    }

    // MARK: Connection

    /// Connects now (if not connected), so that a bad URL, password, database or TLS shows at once.
    public func connect() throws(PostgresStoreError) {
        try withConnection { _ in }
    }

    /// Closes the connection (the next use connects again).
    public func disconnect() {
        let c = state.withLock { s -> PostgresConnection? in
            let c = s
            s = nil
            return c
        }
        if let c { _ = try? wait(c.close(), seconds: 5) }
    }

    /// Runs `body` with the connection, connecting first when there is none. Any failure drops the
    /// connection (the next call connects again) and is described as a ``PostgresStoreError``.
    func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws(PostgresStoreError) -> T {
        do {
            return try state.withLock { s throws -> T in
                let c: PostgresConnection
                if let existing = s, !existing.isClosed {
                    c = existing
                } else {
                    s = nil
                    c = try wait(
                        PostgresConnection.connect(
                            on: group.next(), configuration: try configuration(),
                            id: nextID.add(1, ordering: .relaxed).oldValue, logger: logger
                        ), seconds: Double(url.connectTimeoutSeconds) + 5)
                    s = c
                }
                do {
                    return try body(c)
                } catch {
                    if Self.dropsConnection(error) {
                        s = nil
                        _ = try? wait(c.close(), seconds: 5)
                    }
                    throw error
                }
            }
        } catch let e as PostgresStoreError {
            throw e
        } catch {
            throw describe(error)
        }
    }

    /// Whether the connection is no use after `error` (anything but a statement the server refused).
    static func dropsConnection(_ error: any Error) -> Bool {
        // A statement with no answer (a timeout here) leaves the connection in an unknown state.
        if let e = error as? PostgresStoreError { return e.transient }
        guard let e = error as? PSQLError else { return true }
        return e.code != .server
    }

    @discardableResult
    func run(_ c: PostgresConnection, _ sql: String) throws -> PostgresQueryResult {
        try wait(c.query(PostgresQuery(unsafeSQL: sql), logger: logger), seconds: statementTimeoutSeconds)
    }

    @discardableResult
    func run(_ c: PostgresConnection, _ q: PostgresQuery) throws -> PostgresQueryResult {
        try wait(c.query(q, logger: logger), seconds: statementTimeoutSeconds)
    }

    /// How long a statement may go unanswered before the connection is given up (a server that
    /// died without the connection noticing would otherwise block a drain for ever).
    let statementTimeoutSeconds: Double = 60

    /// Ends whatever waits for the server, from any thread, and every wait after: a store that
    /// stops does not wait out a statement timeout on a server that does not answer.
    public func interrupt() {
        interrupted.store(true, ordering: .relaxed)
    }

    /// The future's value, waited for on this thread (never the event loop's) for at most
    /// `seconds`, or until ``interrupt()``.
    func wait<T>(_ f: EventLoopFuture<T>, seconds: Double) throws -> T {
        let done = DispatchSemaphore(value: 0)
        let box = ResultBox<T>()
        f.whenComplete { r in
            box.set(r)
            done.signal()
        }
        let deadline = DispatchTime.now() + seconds
        // In slices, to see an interrupt (a twentieth of a second at most).
        while done.wait(timeout: min(deadline, .now() + 0.05)) == .timedOut {
            if interrupted.load(ordering: .relaxed) {
                throw PostgresStoreError(
                    server: url.serverName, message: "no answer by the time cuff stopped", transient: true)
            }
            if DispatchTime.now() >= deadline {
                throw PostgresStoreError(
                    server: url.serverName, message: "no answer within \(Int(seconds)) s", transient: true)
            }
        }
        guard let r = box.get() else {
            throw PostgresStoreError(server: url.serverName, message: "no answer", transient: true)
        }
        return try r.get()
    }

    func configuration() throws -> PostgresConnection.Configuration {
        var config: PostgresConnection.Configuration
        if let socket = url.socketPath {
            config = .init(unixSocketPath: socket, username: url.user, password: url.password, database: url.database)
        } else {
            let tls: PostgresConnection.Configuration.TLS
            if url.sslMode == .disable {
                tls = .disable
            } else {
                var t = TLSConfiguration.makeClientConfiguration()
                switch url.sslMode {
                case .disable, .prefer, .require: t.certificateVerification = .none
                case .verifyCA: t.certificateVerification = .noHostnameVerification
                case .verifyFull: t.certificateVerification = .fullVerification
                }
                if let root = url.sslRootCert { t.trustRoots = .file(root) }
                let ctx = try NIOSSLContext(configuration: t)
                tls = url.sslMode == .prefer ? .prefer(ctx) : .require(ctx)
            }
            config = .init(
                host: url.host ?? "localhost", port: url.port, username: url.user, password: url.password,
                database: url.database, tls: tls)
        }
        config.options.connectTimeout = .seconds(Int64(url.connectTimeoutSeconds))
        return config
    }

    /// A failure said plainly: what was refused or unreachable, and whether trying later may help.
    func describe(_ error: any Error) -> PostgresStoreError {
        let server = url.serverName
        func e(_ m: String, transient: Bool) -> PostgresStoreError {
            PostgresStoreError(server: server, message: m, transient: transient)
        }
        if let p = error as? PSQLError {
            switch p.code {
            case .server:
                let state = p.serverInfo?[.sqlState] ?? "?"
                let message = p.serverInfo?[.message] ?? "error"
                switch state {
                case "28P01":
                    let from =
                        url.passwordSource.map { $0 == "url" ? "the URL" : $0 } ?? "nowhere (no password was given)"
                    return e("\(message) (SQLSTATE 28P01; the password came from \(from))", transient: false)
                case "3D000":
                    return e(
                        "\(message) (SQLSTATE 3D000; create it, or name another database in the URL)", transient: false)
                case "57P01", "57P02", "57P03", "53300", "08006", "08001", "08004", "40001", "40P01":
                    return e("\(message) (SQLSTATE \(state))", transient: true)
                default:
                    // Class 28 (authorization), 42 (syntax, permissions) and the rest need a change.
                    return e(
                        "\(message) (SQLSTATE \(state))",
                        transient: !state.hasPrefix("28") && !state.hasPrefix("42") && !state.hasPrefix("3D"))
                }
            case .sslUnsupported:
                return e(
                    "the server does not accept TLS, and sslmode=\(url.sslMode.rawValue) requires it", transient: false)
            case .authMechanismRequiresPassword:
                return e(
                    "the server asks for a password for user \(url.user): give it in the URL, PGPASSWORD or a ~/.pgpass file (PGPASSFILE)",
                    transient: false)
            case .unsupportedAuthMechanism, .saslError:
                return e(
                    "authentication failed: \(p.underlying.map { String(describing: $0) } ?? p.code.description)",
                    transient: false)
            case .failedToAddSSLHandler, .receivedUnencryptedDataAfterSSLRequest:
                return e(
                    "TLS failed: \(p.underlying.map { String(describing: $0) } ?? p.code.description)", transient: false
                )
            case .connectionError, .serverClosedConnection, .uncleanShutdown, .clientClosedConnection:
                if let u = p.underlying {
                    if u is NIOSSLError || u is BoringSSLError {
                        return e("TLS failed: \(u)", transient: false)
                    }
                    return e(
                        "cannot reach the server: \(Self.network(u, timeout: url.connectTimeoutSeconds))",
                        transient: true)
                }
                return e(
                    p.code == .connectionError ? "cannot reach the server" : "the server closed the connection",
                    transient: true)
            default:
                return e("\(p.code)", transient: true)
            }
        }
        if error is NIOSSLError || error is BoringSSLError { return e("TLS: \(error)", transient: false) }
        return e(Self.network(error, timeout: url.connectTimeoutSeconds), transient: true)
    }

    /// A socket error as `strerror` says it ("Connection refused"), a connect timeout in seconds.
    static func network(_ error: any Error, timeout: Int) -> String {
        if let io = error as? IOError { return String(cString: strerror(io.errnoCode)) }
        if let c = error as? NIOConnectionError {
            if let first = c.connectionErrors.first { return network(first.error, timeout: timeout) }
            if let d = c.dnsAError ?? c.dnsAAAAError { return "cannot resolve \(c.host): \(d)" }
            return "cannot connect to \(c.host):\(c.port)"
        }
        if let ch = error as? ChannelError, case .connectTimeout = ch {
            return "no answer within \(timeout) s (connect_timeout)"
        }
        return String(describing: error)
    }
}
