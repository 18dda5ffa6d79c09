// SPDX-License-Identifier: GPL-2.0-or-later

/// The SQL dialects cuff's stores speak: the SQLite store (and outbox) and the shared PostgreSQL
/// store.
public enum SQLDialect: Sendable, Hashable, CaseIterable {
    case sqlite
    case postgres
}

/// One column of a store table: its name, type, nullability and keys, in both dialects.
public struct StoreColumn: Sendable, Hashable {
    /// What a column holds, and so its type in each dialect.
    public enum Kind: Sendable, Hashable {
        /// The row id: `INTEGER PRIMARY KEY` (SQLite's rowid) or `BIGSERIAL PRIMARY KEY`.
        case rowID
        /// The id of a row of the named table (without a prefix): `INTEGER` or `BIGINT`,
        /// `REFERENCES table(id)`.
        case reference(String)
        /// `TEXT` in both.
        case text
        /// `BLOB` or `BYTEA`.
        case bytes
        /// `INTEGER` in both (32 bits in PostgreSQL).
        case integer
        /// `INTEGER` (SQLite's are 64-bit) or `BIGINT`.
        case bigInteger
        /// `REAL` or `DOUBLE PRECISION`.
        case real
        /// `INTEGER` (0 or 1) or `BOOLEAN`.
        case boolean
        /// `TIMESTAMPTZ` (PostgreSQL only; SQLite keeps times as text or microseconds).
        case timestamp

        func type(_ dialect: SQLDialect) -> String {
            switch (self, dialect) {
            case (.rowID, .sqlite): "INTEGER PRIMARY KEY"
            case (.rowID, .postgres): "BIGSERIAL PRIMARY KEY"
            case (.reference, .sqlite), (.integer, _), (.bigInteger, .sqlite), (.boolean, .sqlite): "INTEGER"
            case (.reference, .postgres), (.bigInteger, .postgres): "BIGINT"
            case (.text, _): "TEXT"
            case (.bytes, .sqlite): "BLOB"
            case (.bytes, .postgres): "BYTEA"
            case (.real, .sqlite): "REAL"
            case (.real, .postgres): "DOUBLE PRECISION"
            case (.boolean, .postgres): "BOOLEAN"
            case (.timestamp, _): "TIMESTAMPTZ"
            }
        }
    }

    public var name: String
    public var kind: Kind
    /// NULL allowed.
    public var nullable: Bool
    /// A `UNIQUE` key.
    public var unique: Bool
    /// The SQL expression of its `DEFAULT`, or nil.
    public var defaultValue: String?
    /// The condition of its `CHECK`, or nil.
    public var check: String?
    /// The stores that have it (a column added later, or kept by one store only).
    public var dialects: Set<SQLDialect>

    public init(
        _ name: String, _ kind: Kind, nullable: Bool = false, unique: Bool = false, defaultValue: String? = nil,
        check: String? = nil,
        dialects: Set<SQLDialect> = Set(SQLDialect.allCases)
    ) {
        self.name = name
        self.kind = kind
        self.nullable = nullable
        self.unique = unique
        self.defaultValue = defaultValue
        self.check = check
        self.dialects = dialects
    }

    /// The column's definition in `dialect`, referenced tables named with `prefix`.
    public func definition(_ dialect: SQLDialect, prefix: String = "") -> String {
        var s = name + " " + kind.type(dialect)
        if !nullable && kind != .rowID { s += " NOT NULL" }
        if let defaultValue { s += " DEFAULT " + defaultValue }
        if unique { s += " UNIQUE" }
        if let check { s += " CHECK (\(check))" }
        if case let .reference(table) = kind { s += " REFERENCES \(prefix)\(table)(id)" }
        return s
    }
}

/// An index of a store table.
public struct StoreIndex: Sendable, Hashable {
    /// The name without the table prefix.
    public var name: String
    public var columns: [String]
    public var dialects: Set<SQLDialect>

    public init(_ name: String, on columns: [String], dialects: Set<SQLDialect> = Set(SQLDialect.allCases)) {
        self.name = name
        self.columns = columns
        self.dialects = dialects
    }
}

/// A store table: its columns and indexes.
public struct StoreTable: Sendable, Hashable {
    /// The name without a prefix (the PostgreSQL store's tables are `cuff_`-prefixed).
    public var name: String
    public var columns: [StoreColumn]
    public var indexes: [StoreIndex]

    public init(_ name: String, columns: [StoreColumn], indexes: [StoreIndex] = []) {
        self.name = name
        self.columns = columns
        self.indexes = indexes
    }

    /// The columns a stored row fills, in table order: all but the row id and what only one
    /// dialect keeps (the server's `shipped_at`, set by its default).
    public var filledColumns: [String] {
        columns.filter { $0.kind != .rowID && $0.dialects == Set(SQLDialect.allCases) }.map(\.name)
    }

    /// `CREATE TABLE` and then `CREATE INDEX` for each index, as statements without the `;`, with
    /// the columns and indexes `dialect` has; table and index names get `prefix`.
    public func statements(_ dialect: SQLDialect, prefix: String = "") -> [String] {
        let columns = columns.filter { $0.dialects.contains(dialect) }.map {
            "    " + $0.definition(dialect, prefix: prefix)
        }
        let table = "CREATE TABLE \(prefix)\(name) (\n" + columns.joined(separator: ",\n") + "\n)"
        return [table]
            + indexes.filter { $0.dialects.contains(dialect) }.map {
                "CREATE INDEX \(prefix)\($0.name) ON \(prefix)\(name)(\($0.columns.joined(separator: ", ")))"
            }
    }
}

/// The store's tables, once for both stores: the SQLite store (migration `v1`, see `SQLiteStore`)
/// and the PostgreSQL store (`cuff_`-prefixed, with what only a shared server keeps).
///
/// These tables are the first migration of both stores, and existing stores were made from them:
/// a change here is a schema change, made as a new migration in each store (SinksTests'
/// `StoreSchemaTests` pin the text both dialects render).
public enum StoreSchema {
    /// A cuff, by its identity (address or serial; see `DeviceInfo`).
    public static let devices = StoreTable(
        "devices",
        columns: [
            StoreColumn("id", .rowID),
            StoreColumn("identity", .text, unique: true),
            StoreColumn("address", .text),
            StoreColumn("name", .text, nullable: true),
            StoreColumn("manufacturer", .text, nullable: true),
            StoreColumn("model", .text, nullable: true),
            StoreColumn("serial", .text, nullable: true),
            StoreColumn("firmware", .text, nullable: true),
        ])

    /// One reading: the raw value, the codec's fields, where it came from and when; `dedup_key`
    /// keeps a reading once whoever stores it.
    public static let measurements = StoreTable(
        "measurements",
        columns: [
            StoreColumn("id", .rowID),
            StoreColumn("device_id", .reference("devices")),
            StoreColumn("characteristic", .text),
            StoreColumn("raw", .bytes),
            StoreColumn("quirks", .integer, defaultValue: "0"),
            StoreColumn("unit", .text, check: "unit IN ('mmHg', 'kPa')"),
            StoreColumn("systolic", .real, nullable: true),
            StoreColumn("diastolic", .real, nullable: true),
            StoreColumn("mean_arterial_pressure", .real, nullable: true),
            StoreColumn("pulse_rate", .real, nullable: true),
            StoreColumn("systolic_raw", .integer),
            StoreColumn("diastolic_raw", .integer),
            StoreColumn("mean_arterial_pressure_raw", .integer),
            StoreColumn("pulse_rate_raw", .integer, nullable: true),
            StoreColumn("systolic_special", .text, nullable: true),
            StoreColumn("diastolic_special", .text, nullable: true),
            StoreColumn("mean_arterial_pressure_special", .text, nullable: true),
            StoreColumn("pulse_rate_special", .text, nullable: true),
            StoreColumn("timestamp", .text, nullable: true),
            StoreColumn("user_id", .integer, nullable: true),
            StoreColumn("status", .integer, nullable: true),
            StoreColumn("stored", .boolean),
            StoreColumn("sequence_number", .integer, nullable: true),
            StoreColumn("received_at", .text),
            StoreColumn("received_at_us", .bigInteger),
            StoreColumn("host_utc_offset", .integer),
            StoreColumn("dedup_key", .text, unique: true),
            StoreColumn("warnings", .text),
            StoreColumn("decoded", .text),
            // When the row reached the server (a hub's outbox keeps its own record of that).
            StoreColumn("shipped_at", .timestamp, defaultValue: "now()", dialects: [.postgres]),
        ],
        indexes: [
            StoreIndex("measurements_by_received", on: ["received_at_us", "id"]),
            // The newest sequence number of a device, for the server that many hubs ship to.
            StoreIndex("measurements_by_device", on: ["device_id", "sequence_number"], dialects: [.postgres]),
        ])

    /// The tables in creation order.
    public static let tables = [devices, measurements]

    /// The statements that make the tables in `dialect` (table and index names with `prefix`).
    public static func statements(_ dialect: SQLDialect, prefix: String = "") -> [String] {
        tables.flatMap { $0.statements(dialect, prefix: prefix) }
    }

    /// The plain SQLite store's tables, as migration `v1` makes them: the statements, each ended
    /// by `;`, one a line (the text of v1 since the store began: `sqlite_master` keeps it).
    public static let v1 = statements(.sqlite).map { $0 + ";" }.joined(separator: "\n")

    /// The measurement columns both stores' INSERT name, in this order (their values are bound in it).
    public static let measurementColumnList = measurements.filledColumns.joined(separator: ", ")
}
