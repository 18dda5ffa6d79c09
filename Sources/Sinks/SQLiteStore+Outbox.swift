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
    public func pending(limit: Int) throws(SinkError) -> [StoredMeasurement] {
        guard crypto == nil else { throw .storeRead(path: path, reason: "an encrypted store is not an outbox") }
        do {
            let r = try db.read { db in
                try SQLiteStore.readRows(
                    db, sql: StoreRows.pendingSQL(deviceColumns: SQLiteStore.deviceColumns(db)), arguments: [limit])
            }
            // A row that cannot be read cannot be shipped either: say which, rather than skip it unseen.
            if let p = r.skipped.first { throw SinkError.storeRead(path: path, reason: p.description) }
            if r.withoutDevice > 0, let row = r.rows.first(where: { $0.device.address.isEmpty }) {
                throw SinkError.storeRead(path: path, reason: "row \(row.id): its device row is missing")
            }
            return r.rows
        } catch let e as SinkError {
            throw e
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
    /// What ``claimOutbox(for:)`` found.
    public enum OutboxClaim: Sendable, Equatable {
        /// The outbox is this destination's: it was already, or it was nobody's yet (a new
        /// outbox, or one an earlier cuff kept without saying whose it is).
        case claimed
        /// It was another destination's, and empty: it is this one's now, and the dedup keys
        /// delivered to the other are forgotten (this destination never had those readings).
        case taken(from: String)
        /// Readings for another destination wait in it; nothing was changed.
        case heldFor(String, waiting: Int)
    }

    /// Claims an outbox for one destination (an MQTT topic prefix, a PostgreSQL server's
    /// database): an outbox's readings go to the destination they were kept for, never to another
    /// that happens to open the same file (two processes, or a changed URL, with one outbox). In
    /// one transaction. Without `takingEmpty`, an empty outbox of another destination stays
    /// theirs too (``OutboxClaim/heldFor(_:waiting:)`` with 0).
    public func claimOutbox(for destination: String, takingEmpty: Bool = true) throws(SinkError) -> OutboxClaim {
        do {
            return try db.write { db in
                try db.execute(sql: Self.destinationTable)
                // (As text whatever was stored there; a table left without a usable row is claimed anew.)
                guard
                    let held = try String.fetchOne(
                        db,
                        sql:
                            "SELECT CAST(destination AS TEXT) FROM outbox_destination WHERE destination IS NOT NULL ORDER BY rowid LIMIT 1"
                    )
                else {
                    try db.execute(sql: "DELETE FROM outbox_destination")
                    try db.execute(
                        sql: "INSERT INTO outbox_destination (destination) VALUES (?)", arguments: [destination])
                    return .claimed
                }
                if held == destination { return .claimed }
                let waiting = try Int.fetchOne(db, sql: "SELECT count(*) FROM measurements") ?? 0
                if waiting > 0 || !takingEmpty { return .heldFor(held, waiting: waiting) }
                try db.execute(sql: "UPDATE outbox_destination SET destination = ?", arguments: [destination])
                try db.execute(sql: Self.sentTable)
                try db.execute(sql: "DELETE FROM outbox_sent")
                return .taken(from: held)
            }
        } catch {
            throw .storeOpen(path: path, reason: "cannot claim it as an outbox: \(SQLiteStore.describe(error))")
        }
    }

    /// The readings waiting in the outbox at `path` when no destination ever claimed it (kept by
    /// a cuff from before outboxes were claimed); nil when there is no such file, it is claimed,
    /// it is empty, or it cannot be read. Read-only: nothing is made or changed.
    public static func unclaimedOutboxWaiting(path: String) -> Int? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        var config = Configuration()
        config.readonly = true
        config.busyMode = .timeout(1)
        do {
            let queue = try DatabaseQueue(path: path, configuration: config)
            defer { try? queue.close() }
            return try queue.read { db -> Int? in
                guard try !db.tableExists("outbox_destination"), try db.tableExists("measurements") else { return nil }
                let n = try Int.fetchOne(db, sql: "SELECT count(*) FROM measurements") ?? 0
                return n > 0 ? n : nil
            }
        } catch {
            return nil
        }
    }

    static let destinationTable = "CREATE TABLE IF NOT EXISTS outbox_destination (destination TEXT NOT NULL)"
}

/// The outbox's place: `--outbox PATH`, else `$XDG_STATE_HOME/cuff/outbox.db` (by default
/// `~/.local/state/cuff/outbox.db`).
public enum Outbox {
    public static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        stateDirectory(environment: environment) + "/outbox.db"
    }

    /// The default outbox of one destination when `outbox.db` is another's:
    /// `$XDG_STATE_HOME/cuff/outbox-NAME.db`, `NAME` made of ASCII letters, digits, `-` and `_`.
    public static func defaultPath(
        named name: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String {
        stateDirectory(environment: environment) + "/outbox-\(slug(name)).db"
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
