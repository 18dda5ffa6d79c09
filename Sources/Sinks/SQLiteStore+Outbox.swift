// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import GRDB
import StoreFormat

/// A plain SQLite store used as an outbox (`--outbox PATH`, in front of a server store): readings
/// are committed here before the cuff is confirmed, read out oldest first, and removed only once
/// the server has committed them.
extension SQLiteStore {
    /// Up to `limit` stored rows, oldest insertion first (lowest id), with their devices.
    public func pending(limit: Int) throws(SinkError) -> [StoredMeasurement] {
        guard crypto == nil else { throw .storeRead(path: path, reason: "an encrypted store is not an outbox") }
        do {
            let r = try db.read { db in try SQLiteStore.readRows(db, sql: StoreRows.pendingSQL, arguments: [limit]) }
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

    /// Removes the rows with these ids (shipped ones), in one commit.
    public func remove(ids: [Int64]) throws(SinkError) {
        guard !ids.isEmpty else { return }
        do {
            try db.write { db in
                // In chunks: SQLite limits the number of bound parameters.
                var i = 0
                while i < ids.count {
                    let chunk = Array(ids[i..<min(i + 500, ids.count)])
                    let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                    try db.execute(sql: "DELETE FROM measurements WHERE id IN (\(marks))", arguments: StatementArguments(chunk))
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
                try Int.fetchOne(db, sql: crypto == nil ? "SELECT count(*) FROM measurements" : "SELECT count(*) FROM sealed_measurements") ?? 0
            }
        } catch {
            throw .storeRead(path: path, reason: SQLiteStore.describe(error))
        }
    }
}
