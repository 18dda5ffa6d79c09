// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession

/// One SQLite value as it is in the file. SQLite does not enforce column types: any cell of a
/// store may hold any of these, whatever its column was declared as.
public enum StoreValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    /// The storage class's name, for messages (never the value itself).
    public var kind: String {
        switch self {
        case .null: "NULL"
        case .integer: "an integer"
        case .real: "a real number"
        case .text: "text"
        case .blob: "a BLOB"
        }
    }
}

/// Why one stored row cannot be read: its row id and the column, never a value.
public struct StoreRowProblem: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The store has no such column (it was dropped).
        case missingColumn
        /// The cell holds another storage class than the column's (its kind is given).
        case wrongType(expected: String, found: String)
        /// The cell is NULL where a value is needed.
        case null
        /// A number outside the column's range, or a name the column does not know.
        case outOfRange
        /// The raw bytes no longer decode with the BloodPressure codec (the codec's message:
        /// field and byte offset, no values).
        case undecodable(String)
        /// An encrypted store's sealed row does not open with the store's key (which opens the
        /// others): it was changed or damaged.
        case doesNotAuthenticate
        /// The measurement's device row is missing (an outbox ships a reading with its device).
        case missingDevice
    }

    public var rowID: Int64
    /// The column concerned (`raw` for an undecodable value).
    public var column: String
    public var kind: Kind

    public init(rowID: Int64, column: String, kind: Kind) {
        self.rowID = rowID
        self.column = column
        self.kind = kind
    }

    public var description: String {
        switch kind {
        case .missingColumn: "row \(rowID): the store has no column \(column)"
        case let .wrongType(expected, found): "row \(rowID): column \(column) holds \(found), not \(expected)"
        case .null: "row \(rowID): column \(column) is NULL"
        case .outOfRange: "row \(rowID): column \(column) holds a value out of range"
        case let .undecodable(why): "row \(rowID): the raw value does not decode: \(why)"
        case .missingDevice: "row \(rowID): its device row is missing"
        case .doesNotAuthenticate:
            "row \(rowID): the sealed row does not authenticate with the store's key: it was changed or damaged"
        }
    }
}

/// The `measurements` table as the store reader sees it: the query, and each row read column by
/// column without trusting a declared type (pure: no SQLite here; `SQLiteStore` and the fuzz target
/// run the query and hand over the cells).
public enum StoreRows {
    /// The `devices` columns the queries read, each as `d_NAME`.
    public static let deviceColumns = ["address", "name", "manufacturer", "model", "serial", "firmware"]

    /// Every measurement with its device, in received order (then insertion order). A measurement
    /// whose device row is missing comes too (`d_id` is NULL then). `cuff_row` is the row id.
    /// `deviceColumns`: the columns the store's `devices` table has (a dropped one is left out of
    /// the query, so the query still runs: a dropped address skips the rows, with a problem
    /// naming it; a dropped name reads as none).
    public static func historySQL(deviceColumns present: Set<String>) -> String {
        query(present, order: "ORDER BY m.received_at_us, m.rowid")
    }

    /// Like ``historySQL(deviceColumns:)``, oldest insertion first, at most `?` rows (an outbox's next batch).
    public static func pendingSQL(deviceColumns present: Set<String>) -> String {
        query(present, order: "ORDER BY m.rowid LIMIT ?")
    }

    /// ``historySQL(deviceColumns:)`` for a store with every device column.
    public static let historySQL = historySQL(deviceColumns: Set(deviceColumns))
    /// ``pendingSQL(deviceColumns:)`` for a store with every device column.
    public static let pendingSQL = pendingSQL(deviceColumns: Set(deviceColumns))

    /// The history query of a store whose tables have other names (PostgreSQL's `cuff_measurements`
    /// and `cuff_devices`, its row id `m.id`): the same result columns as ``historySQL(deviceColumns:)``.
    public static func historySQL(
        deviceColumns present: Set<String>, measurements: String, devices: String, rowID: String
    ) -> String {
        query(
            present, measurements: measurements, devices: devices, rowID: rowID,
            order: "ORDER BY m.received_at_us, \(rowID)")
    }

    static func query(
        _ present: Set<String>, measurements: String = "measurements", devices: String = "devices",
        rowID: String = "m.rowid", order: String
    ) -> String {
        let device = deviceColumns.filter { present.contains($0) }.map { ", d.\($0) AS d_\($0)" }.joined()
        return """
            SELECT \(rowID) AS cuff_row, m.*, d.id AS d_id\(device)
            FROM \(measurements) m LEFT JOIN \(devices) d ON d.id = m.device_id
            \(order)
            """
    }

    /// The latest received time a store can hold: 9999-12-31T23:59:59.999999Z, in µs since 1970.
    public static let latestMicros: Int64 = 253_402_300_799_999_999
    /// The largest host UTC offset a row can hold (ISO 8601's ±18:00), in seconds.
    public static let largestUTCOffset = 18 * 3600

    /// Where each column the reader needs is in a result row; made once per query from its column names.
    public struct Layout: Sendable {
        let index: [String: Int]

        public init(columnNames: [String]) {
            var index: [String: Int] = [:]
            // The first of a name wins (`m.*` comes before the device's aliased columns).
            for (i, n) in columnNames.enumerated() where index[n.lowercased()] == nil { index[n.lowercased()] = i }
            self.index = index
        }

        func position(_ column: String) -> Int? { index[column] }
    }

    /// A row read: the measurement, and whether its device row was missing (then the device is
    /// unknown: an empty address and no names).
    public struct Decoded: Sendable, Hashable {
        public var measurement: StoredMeasurement
        public var deviceRowMissing: Bool
    }

    /// Reads one result row of ``historySQL`` or ``pendingSQL``: `cells` in the query's column
    /// order. Every column is checked for its storage class and range; the first that does not fit
    /// makes the row unreadable (the problem names the row and the column).
    public static func decode(_ layout: Layout, _ cells: [StoreValue]) throws(StoreRowProblem) -> Decoded {
        var c = Cells(layout: layout, cells: cells, rowID: -1)
        guard case let .integer(row)? = c.value("cuff_row") else {
            throw StoreRowProblem(rowID: -1, column: "rowid", kind: .missingColumn)
        }
        c.rowID = row
        let characteristic = try c.text("characteristic")
        guard let ch = RecordCharacteristic(argument: characteristic) else {
            throw c.problem("characteristic", StoreRowProblem.Kind.outOfRange)
        }
        guard let unit = PressureUnit(rawValue: try c.text("unit")) else {
            throw c.problem("unit", StoreRowProblem.Kind.outOfRange)
        }
        let quirks = try c.integer("quirks", in: 0...255)
        let stored = try c.integer("stored", in: 0...1)
        let missing = (try c.optionalInteger("d_id", in: Int64.min...Int64.max)) == nil
        let device =
            missing
            ? DeviceInfo(address: "")
            : DeviceInfo(
                address: try c.text("d_address"), name: try c.optionalText("d_name"),
                manufacturer: try c.optionalText("d_manufacturer"),
                model: try c.optionalText("d_model"), serial: try c.optionalText("d_serial"),
                firmware: try c.optionalText("d_firmware"))
        let m = StoredMeasurement(
            id: row, device: device, characteristic: ch, raw: try c.blob("raw"),
            quirks: QuirkProfile.Options(rawValue: UInt8(quirks)),
            unit: unit, systolic: try c.optionalReal("systolic"), diastolic: try c.optionalReal("diastolic"),
            meanArterialPressure: try c.optionalReal("mean_arterial_pressure"),
            pulseRate: try c.optionalReal("pulse_rate"),
            systolicRaw: try c.word("systolic_raw"), diastolicRaw: try c.word("diastolic_raw"),
            meanArterialPressureRaw: try c.word("mean_arterial_pressure_raw"),
            pulseRateRaw: try c.optionalWord("pulse_rate_raw"),
            systolicSpecial: try c.optionalText("systolic_special"),
            diastolicSpecial: try c.optionalText("diastolic_special"),
            meanArterialPressureSpecial: try c.optionalText("mean_arterial_pressure_special"),
            pulseRateSpecial: try c.optionalText("pulse_rate_special"), timestamp: try c.optionalText("timestamp"),
            userID: try c.optionalInteger("user_id", in: 0...255).map { UInt8($0) },
            status: try c.optionalWord("status"),
            stored: stored == 1, sequenceNumber: try c.optionalWord("sequence_number"),
            receivedAt: try c.text("received_at"),
            receivedAtMicros: try c.integer("received_at_us", in: 0...latestMicros),
            hostUTCOffsetSeconds: Int(
                try c.integer("host_utc_offset", in: Int64(-largestUTCOffset)...Int64(largestUTCOffset))),
            dedupKey: try c.text("dedup_key"), warningsJSON: try c.text("warnings"), decodedJSON: try c.text("decoded"))
        return Decoded(measurement: m, deviceRowMissing: missing)
    }

    /// ``decode(_:_:)``, then the record the raw bytes decode to again (as `cuff history` prints it).
    public static func record(_ m: StoredMeasurement) throws(StoreRowProblem) -> MeasurementRecord {
        do throws(BPSDecodingError) { return try m.record() } catch {
            throw StoreRowProblem(rowID: m.id, column: "raw", kind: .undecodable(error.message))
        }
    }

    /// One row's cells, read by column name with the checks.
    struct Cells {
        let layout: Layout
        let cells: [StoreValue]
        var rowID: Int64

        func problem(_ column: String, _ kind: StoreRowProblem.Kind) -> StoreRowProblem {
            // (A device column by its table's name: `d_address` is `devices.address`.)
            StoreRowProblem(
                rowID: rowID, column: column.hasPrefix("d_") ? "devices." + column.dropFirst(2) : column, kind: kind)
        }

        func value(_ column: String) -> StoreValue? {
            guard let i = layout.position(column), i < cells.count else { return nil }
            return cells[i]
        }

        /// The cell (nil when NULL), or a problem when the column is missing and `required`. A
        /// nullable column that was dropped reads as NULL.
        func present(_ column: String, required: Bool) throws(StoreRowProblem) -> StoreValue? {
            guard let v = value(column) else {
                if required { throw problem(column, .missingColumn) }
                return nil
            }
            if case .null = v { return nil }
            return v
        }

        func optionalText(_ column: String, required: Bool = false) throws(StoreRowProblem) -> String? {
            switch try present(column, required: required) {
            case nil: return nil
            case let .text(s)?: return s
            case let v?: throw problem(column, .wrongType(expected: "text", found: v.kind))
            }
        }

        func text(_ column: String) throws(StoreRowProblem) -> String {
            guard let s = try optionalText(column, required: true) else { throw problem(column, .null) }
            return s
        }

        func blob(_ column: String) throws(StoreRowProblem) -> [UInt8] {
            switch try present(column, required: true) {
            case nil: throw problem(column, .null)
            case let .blob(b)?: return b
            case let v?: throw problem(column, .wrongType(expected: "a BLOB", found: v.kind))
            }
        }

        func optionalInteger(_ column: String, in range: ClosedRange<Int64>, required: Bool = false)
            throws(StoreRowProblem) -> Int64?
        {
            let n: Int64
            switch try present(column, required: required) {
            case nil: return nil
            case let .integer(i)?: n = i
            case let .real(d)?:
                // A whole number kept as REAL is still that number.
                guard let i = Int64(exactly: d) else {
                    throw problem(column, .wrongType(expected: "an integer", found: "a real number"))
                }
                n = i
            case let v?: throw problem(column, .wrongType(expected: "an integer", found: v.kind))
            }
            guard range.contains(n) else { throw problem(column, .outOfRange) }
            return n
        }

        func integer(_ column: String, in range: ClosedRange<Int64>) throws(StoreRowProblem) -> Int64 {
            guard let n = try optionalInteger(column, in: range, required: true) else { throw problem(column, .null) }
            return n
        }

        func optionalWord(_ column: String) throws(StoreRowProblem) -> UInt16? {
            try optionalInteger(column, in: 0...0xFFFF).map { UInt16($0) }
        }

        func word(_ column: String) throws(StoreRowProblem) -> UInt16 { UInt16(try integer(column, in: 0...0xFFFF)) }

        func optionalReal(_ column: String) throws(StoreRowProblem) -> Double? {
            switch try present(column, required: false) {
            case nil: return nil
            case let .real(d)?: return d
            case let .integer(i)?: return Double(i)
            case let v?: throw problem(column, .wrongType(expected: "a number", found: v.kind))
            }
        }
    }
}

/// What a store reader got: the rows it could read, and the ones it skipped (row id and why, no values).
public struct StoreReading: Sendable {
    public var rows: [StoredMeasurement]
    public var skipped: [StoreRowProblem]
    /// How many of `rows` had no device row (shown with an unknown device).
    public var withoutDevice: Int

    public init(rows: [StoredMeasurement], skipped: [StoreRowProblem] = [], withoutDevice: Int = 0) {
        self.rows = rows
        self.skipped = skipped
        self.withoutDevice = withoutDevice
    }
}
