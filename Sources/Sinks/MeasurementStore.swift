// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffSession
import StoreFormat

/// What ``MeasurementStore/insert(_:)`` did.
public enum StoreInsertOutcome: Sendable, Hashable {
    /// A new row, with its id.
    case inserted(rowID: Int64)
    /// A row with the same dedup key was already there; nothing changed.
    case duplicate
    public var isNew: Bool { if case .inserted = self { true } else { false } }
}

/// What `cuff measure`, `replay`, `history` and `watch` need from a store, whatever keeps it: the
/// SQLite file (``SQLiteStore``) or a shared server behind a local outbox (the PostgresStore target).
///
/// Every store deduplicates by ``MeasurementRecord/dedupKey`` (a unique constraint), keeps a row
/// durably before ``insert(_:)`` returns, and gives back ``StoredMeasurement`` rows that decode to
/// the same records, so `cuff history` prints the same bytes whatever the store.
public protocol MeasurementStore: SampleSink, Sendable {
    /// For messages: the file's path, or the server's URL without its password.
    var storeName: String { get }
    /// The dedup keys of every stored measurement (for the session's `knownRecordKeys`).
    func knownKeys() throws(SinkError) -> Set<String>
    /// The highest BPS 1.1 record sequence number stored for the device last seen at `address`.
    func lastSequenceNumber(address: String) throws(SinkError) -> UInt16?
    /// Keeps `m` durably unless a row with its dedup key exists.
    @discardableResult func insert(_ m: MeasurementRecord) throws(SinkError) -> StoreInsertOutcome
    /// Keeps every record of `ms` in one commit; returns how many were new.
    @discardableResult func insert(contentsOf ms: [MeasurementRecord]) throws(SinkError) -> Int
    /// Every stored measurement, in received order (then insertion order).
    func history() throws(SinkError) -> [StoredMeasurement]
    /// Every stored measurement that can be read, and the rows that cannot (a damaged SQLite file).
    func readHistory() throws(SinkError) -> StoreReading
}

/// A store's history for printing: each readable row with the record its raw bytes decode to,
/// and the rows skipped (unreadable cells or raw bytes that no longer decode).
public struct StoreRecords: Sendable {
    public var entries: [(stored: StoredMeasurement, record: MeasurementRecord)]
    public var skipped: [StoreRowProblem]
    /// How many entries had no device row (shown with an unknown device).
    public var withoutDevice: Int

    /// Tells `warn` about the rows skipped (the first 20 by row id and why, then how many more)
    /// and the ones shown without a device. Never a value.
    public func warn(_ warn: SinkWarningHandler, store: String) {
        let shown = 20
        for p in skipped.prefix(shown) {
            warn(SinkWarning(sink: "store", message: "\(store): skipped \(p.description)"))
        }
        if skipped.count > shown {
            warn(SinkWarning(sink: "store", message: "\(store): skipped \(skipped.count - shown) more unreadable rows"))
        }
        if withoutDevice > 0 {
            warn(
                SinkWarning(
                    sink: "store",
                    message:
                        "\(store): \(withoutDevice) measurement\(withoutDevice == 1 ? " has" : "s have") no device row; shown with an unknown device"
                ))
        }
    }
}

extension MeasurementStore {
    /// Stores whose rows are always readable (a server's typed columns): ``history()``.
    public func readHistory() throws(SinkError) -> StoreReading { StoreReading(rows: try history()) }

    /// ``readHistory()`` with each row's record decoded again from its raw bytes; a row whose bytes
    /// no longer decode is skipped too.
    public func readRecords() throws(SinkError) -> StoreRecords {
        let r = try readHistory()
        var out = StoreRecords(entries: [], skipped: r.skipped, withoutDevice: r.withoutDevice)
        out.entries.reserveCapacity(r.rows.count)
        for s in r.rows {
            do throws(StoreRowProblem) { out.entries.append((s, try StoreRows.record(s))) } catch {
                out.skipped.append(error)
            }
        }
        out.skipped.sort { $0.rowID < $1.rowID }
        return out
    }

    /// ``history()`` decoded back into records (from the raw bytes), for printing through the sinks.
    public func records() throws(SinkError) -> [MeasurementRecord] {
        var out: [MeasurementRecord] = []
        for s in try history() {
            do throws(BPSDecodingError) { out.append(try s.record()) } catch {
                throw .storedValueUndecodable(path: storeName, rowID: s.id, reason: error.message)
            }
        }
        return out
    }

    /// The host offsets recorded at ingest, by dedup key, for ``UTCOffsetPolicy/recorded(_:fallback:)``.
    public func recordedOffsets() throws(SinkError) -> [String: Int] {
        Dictionary(try history().map { ($0.dedupKey, $0.hostUTCOffsetSeconds) }, uniquingKeysWith: { a, _ in a })
    }

    /// Writes every stored measurement to `sink` as `.measurement` (then nothing else; the caller
    /// finishes the sink). Returns how many were written.
    @discardableResult
    public func replay(into sink: any SampleSink) throws(SinkError) -> Int {
        let rs = try records()
        for r in rs { try sink.write(.measurement(r)) }
        return rs.count
    }
}

/// What a store is opened for.
public enum StorePurpose: Sendable, Hashable {
    /// A session's or replay's sink: readings go in (a server store: through its outbox).
    case write
    /// `cuff history`: read what is there; the store must exist.
    case read
}

/// Opens the stores that are not SQLite files (`postgres://…`); the CLI gives one in
/// ``SinkConfiguration/storeOpener`` so that only it, not Sinks, links the server's driver.
public protocol StoreOpener: Sendable {
    /// Whether `location` names one of its stores (a URL scheme it knows).
    func handles(_ location: String) -> Bool
    func open(
        _ location: String, _ options: SinkConfiguration, purpose: StorePurpose, warn: @escaping SinkWarningHandler
    ) throws(SinkError)
        -> any MeasurementStore
}
