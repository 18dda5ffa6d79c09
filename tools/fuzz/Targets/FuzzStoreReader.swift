// libFuzzer target: the store reader on mutated SQLite files. The input is a database file image
// (the seeds are real stores cuff wrote, see corpus/FuzzStoreReader); Debian's libsqlite3 opens it
// read-only from memory, and the reader runs as `cuff history` runs it: which tables are there,
// then StoreRows.historySQL, every cell handed over as what it is (StoreValue), each row decoded by
// StoreRows.decode, its record decoded again from the raw bytes and written as its JSON line. Any
// trap (an odd cell, a value out of range, a dropped column, a missing device row) is a crash.
// SQLite's work per input is bounded (a progress handler), and so are the rows read.
import CSQLite
import CuffCore
import CuffSession
import StoreFormat

/// The most rows read per input.
let maxRows = 2000

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 100 else { return 0 }
    var db: OpaquePointer?
    guard sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK, let db else { return 0 }
    defer { sqlite3_close(db) }
    // The image, in SQLite's memory (it may keep it until close). A store on disk is in WAL mode
    // (bytes 18 and 19 are 2); from memory it is read as a rollback-journal file, as SQLite's shell does.
    guard let image = sqlite3_malloc64(sqlite3_uint64(size))?.assumingMemoryBound(to: UInt8.self) else { return 0 }
    image.initialize(from: data, count: size)
    if image[18] == 2 && image[19] == 2 { image[18] = 1; image[19] = 1 }
    let flags = UInt32(SQLITE_DESERIALIZE_READONLY | SQLITE_DESERIALIZE_FREEONCLOSE)
    guard sqlite3_deserialize(db, "main", image, sqlite3_int64(size), sqlite3_int64(size), flags) == SQLITE_OK else {
        return 0
    }
    // At most ~10 million virtual-machine steps per input: a hostile file cannot make a query run long.
    let steps = UnsafeMutablePointer<Int>.allocate(capacity: 1)
    steps.initialize(to: 0)
    defer { steps.deallocate() }
    sqlite3_progress_handler(
        db, 10_000,
        { p in
            let n = p!.assumingMemoryBound(to: Int.self)
            n.pointee += 1
            return n.pointee > 1000 ? 1 : 0
        }, steps)

    // Which tables are there (SQLiteStore.layout): a file without `measurements` is no plain store.
    var tables: Set<String> = []
    query(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND typeof(name) = 'text'") { cells in
        if case let .text(t) = cells.first { tables.insert(t) }
        return true
    }
    guard tables.contains("measurements") else { return 0 }
    var layout: StoreRows.Layout?
    var rows = 0
    query(db, StoreRows.historySQL, names: { layout = StoreRows.Layout(columnNames: $0) }) { cells in
        rows += 1
        guard let layout else { return false }
        do throws(StoreRowProblem) {
            let d = try StoreRows.decode(layout, cells)
            let r = try StoreRows.record(d.measurement)
            _ = SessionOutput.measurement(r).json.serialized()
        } catch {
            _ = error.description
        }
        return rows < maxRows
    }
    return 0
}

/// Runs `sql`; hands each row's cells to `row` (which returns whether to go on), the column names
/// once to `names`. An error (a damaged file, the step limit) ends it quietly.
func query(_ db: OpaquePointer, _ sql: String, names: (([String]) -> Void)? = nil, _ row: ([StoreValue]) -> Bool) {
    var stmt: OpaquePointer?
    guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK, let stmt else { return }
    defer { sqlite3_finalize(stmt) }
    let n = sqlite3_column_count(stmt)
    names?((0..<n).map { i in sqlite3_column_name(stmt, i).map { String(cString: $0) } ?? "" })
    while sqlite3_step(stmt) == SQLITE_ROW {
        var cells: [StoreValue] = []
        cells.reserveCapacity(Int(n))
        for i in 0..<n {
            switch sqlite3_column_type(stmt, i) {
            case SQLITE_INTEGER: cells.append(.integer(sqlite3_column_int64(stmt, i)))
            case SQLITE_FLOAT: cells.append(.real(sqlite3_column_double(stmt, i)))
            case SQLITE_TEXT:
                let count = Int(sqlite3_column_bytes(stmt, i))
                let p = sqlite3_column_text(stmt, i)
                cells.append(
                    .text(p.map { String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self) } ?? "")
                )
            case SQLITE_BLOB:
                let count = Int(sqlite3_column_bytes(stmt, i))
                let p = sqlite3_column_blob(stmt, i)?.assumingMemoryBound(to: UInt8.self)
                cells.append(.blob(p.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []))
            default: cells.append(.null)
            }
        }
        if !row(cells) { return }
    }
}
