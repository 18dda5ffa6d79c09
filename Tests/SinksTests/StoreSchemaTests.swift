// SPDX-License-Identifier: GPL-2.0-or-later
import StoreFormat
import Testing

/// One description of the store's tables renders both dialects.
@Suite struct StoreSchemaTests {
    /// SQLite keeps the text of every CREATE in `sqlite_master`: a store made today must get the
    /// same text as every store made since `v1` was written.
    @Test func sqliteV1IsTheTextStoresHaveHadSinceV1() {
        let v1 = """
            CREATE TABLE devices (
                id INTEGER PRIMARY KEY,
                identity TEXT NOT NULL UNIQUE,
                address TEXT NOT NULL,
                name TEXT,
                manufacturer TEXT,
                model TEXT,
                serial TEXT,
                firmware TEXT
            );
            CREATE TABLE measurements (
                id INTEGER PRIMARY KEY,
                device_id INTEGER NOT NULL REFERENCES devices(id),
                characteristic TEXT NOT NULL,
                raw BLOB NOT NULL,
                quirks INTEGER NOT NULL DEFAULT 0,
                unit TEXT NOT NULL CHECK (unit IN ('mmHg', 'kPa')),
                systolic REAL,
                diastolic REAL,
                mean_arterial_pressure REAL,
                pulse_rate REAL,
                systolic_raw INTEGER NOT NULL,
                diastolic_raw INTEGER NOT NULL,
                mean_arterial_pressure_raw INTEGER NOT NULL,
                pulse_rate_raw INTEGER,
                systolic_special TEXT,
                diastolic_special TEXT,
                mean_arterial_pressure_special TEXT,
                pulse_rate_special TEXT,
                timestamp TEXT,
                user_id INTEGER,
                status INTEGER,
                stored INTEGER NOT NULL,
                sequence_number INTEGER,
                received_at TEXT NOT NULL,
                received_at_us INTEGER NOT NULL,
                host_utc_offset INTEGER NOT NULL,
                dedup_key TEXT NOT NULL UNIQUE,
                warnings TEXT NOT NULL,
                decoded TEXT NOT NULL
            );
            CREATE INDEX measurements_by_received ON measurements(received_at_us, id);
            """
        #expect(StoreSchema.v1 == v1)
    }

    @Test func postgresGetsItsTypesThePrefixAndItsOwnColumnAndIndex() {
        let statements = StoreSchema.statements(.postgres, prefix: "cuff_")
        #expect(statements.count == 4)
        #expect(
            statements[0].hasPrefix(
                "CREATE TABLE cuff_devices (\n    id BIGSERIAL PRIMARY KEY,\n    identity TEXT NOT NULL UNIQUE,\n"))
        let measurements = statements[1].split(separator: "\n").map { $0.trimmingPrefix("    ") }
        #expect(measurements.first == "CREATE TABLE cuff_measurements (")
        #expect(measurements.contains("device_id BIGINT NOT NULL REFERENCES cuff_devices(id),"))
        #expect(measurements.contains("raw BYTEA NOT NULL,"))
        #expect(measurements.contains("systolic DOUBLE PRECISION,"))
        #expect(measurements.contains("stored BOOLEAN NOT NULL,"))
        #expect(measurements.contains("received_at_us BIGINT NOT NULL,"))
        #expect(measurements.contains("unit TEXT NOT NULL CHECK (unit IN ('mmHg', 'kPa')),"))
        #expect(measurements.suffix(2) == ["shipped_at TIMESTAMPTZ NOT NULL DEFAULT now()", ")"])
        #expect(statements[2] == "CREATE INDEX cuff_measurements_by_received ON cuff_measurements(received_at_us, id)")
        #expect(
            statements[3] == "CREATE INDEX cuff_measurements_by_device ON cuff_measurements(device_id, sequence_number)"
        )
        // The same columns in both, but for what only the server keeps.
        let names = { (d: SQLDialect) in StoreSchema.measurements.columns.filter { $0.dialects.contains(d) }.map(\.name)
        }
        #expect(names(.postgres) == names(.sqlite) + ["shipped_at"])
    }

    /// Both stores' INSERT name these columns, in this order, and bind their values in it.
    @Test func bothStoresInsertTheSameColumns() {
        #expect(
            StoreSchema.measurementColumnList
                == "device_id, characteristic, raw, quirks, unit, systolic, diastolic, mean_arterial_pressure, pulse_rate, "
                + "systolic_raw, diastolic_raw, mean_arterial_pressure_raw, pulse_rate_raw, systolic_special, diastolic_special, "
                + "mean_arterial_pressure_special, pulse_rate_special, timestamp, user_id, status, stored, sequence_number, "
                + "received_at, received_at_us, host_utc_offset, dedup_key, warnings, decoded")
    }
}
