// SPDX-License-Identifier: GPL-2.0-or-later
// The store: `swift package --package-path Benchmarks benchmark --target Store`. Storing one reading
// as a live session does (a commit and an fsync each), a bulk load and a history read, plain and
// encrypted at rest; and an outbox shipped to PostgreSQL (a throwaway local cluster of Debian's
// server binaries, as the tests start one; skipped without them, or given by CUFF_BENCH_PG_URL).
import Benchmark
import BloodPressure
import CuffCore
import CuffSession
import Foundation
import PostgresStore
import PostgresTestCluster
import Sinks

/// `count` distinct readings: values, times and sequence numbers vary, as a cuff's history does.
func benchReadings(_ count: Int, from first: Int = 0) -> [MeasurementRecord] {
    let device = DeviceInfo(
        address: "AA:BB:CC:DD:EE:FF", name: "BPM-1", manufacturer: "Acme", model: "M7", serial: "SN42", firmware: "1.0")
    return (first..<(first + count)).map { i in
        let v = BloodPressureMeasurement(
            unit: .mmHg, systolic: SFloat(Double(100 + i % 60)), diastolic: SFloat(Double(60 + i % 30)),
            meanArterialPressure: SFloat(Double(80 + i % 20)),
            timestamp: DateTime(unixSeconds: 1_700_000_000 + Int64(i) * 3600),
            pulseRate: SFloat(Double(55 + i % 40)), userID: 1)
        let raw = v.encode()
        let d = try! BloodPressureMeasurement.decode(raw[...])
        let at = EventTime(monotonic: .seconds(Double(i)), wallMicros: (1_700_000_000 + Int64(i) * 3600) * 1_000_000)
        return MeasurementRecord.from(
            bpm: d.value, warnings: d.warnings, raw: raw, device: device, at: at, stored: false)
    }
}

/// A directory of its own under the temporary directory (removed by the caller).
func scratchDirectory(_ label: String) -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-\(label)-\(UUID().uuidString)").path
    try! FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

/// Readings stored by the history benchmarks (and shipped by the PostgreSQL one).
let historySize = 10_000

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput],
        maxDuration: .seconds(5), maxIterations: 2000)
    let dir = scratchDirectory("store-bench")
    let key = try! StoreKey.create(path: dir + "/key")
    let readings = benchReadings(historySize)

    for (label, k) in [("plain", nil), ("encrypted", key)] as [(String, StoreKey?)] {
        // One reading per iteration, committed and fsynced as a live session stores it before confirming it.
        Benchmark("store \(label): one live reading (commit + fsync)") { benchmark, store in
            var i = 0
            for _ in benchmark.scaledIterations {
                _ = try store.insert(readings[i % readings.count])
                i += 1
            }
        } setup: {
            try SQLiteStore(path: dir + "/live-\(label)-\(UUID().uuidString).db", key: k, warn: SinkWarnings.ignore)
        }

        // A bulk load of historySize readings in one transaction, into a new store each time.
        Benchmark("store \(label): bulk load of \(historySize) readings", configuration: .init(maxIterations: 10)) {
            benchmark in
            for _ in benchmark.scaledIterations {
                benchmark.stopMeasurement()
                let path = dir + "/bulk-\(label)-\(UUID().uuidString).db"
                let store = try SQLiteStore(path: path, key: k, warn: SinkWarnings.ignore)
                benchmark.startMeasurement()
                _ = try store.insert(contentsOf: readings)
                try store.finish()
            }
        }

        // A history of historySize readings read back whole.
        Benchmark("store \(label): history of \(historySize) readings", configuration: .init(maxIterations: 20)) {
            benchmark, path in
            for _ in benchmark.scaledIterations {
                let reader = try SQLiteStore(path: path, mustExist: true, key: k, warn: SinkWarnings.ignore)
                let back = try reader.records()
                precondition(back.count == historySize, "history read \(back.count) of \(historySize)")
                try reader.finish()
            }
        } setup: {
            let path = dir + "/history-\(label).db"
            let store = try! SQLiteStore(path: path, key: k, warn: SinkWarnings.ignore)
            _ = try! store.insert(contentsOf: readings)
            try! store.finish()
            return path
        }
    }

    // A full outbox of historySize readings shipped to PostgreSQL in batches of 1000, 100 and 1
    // (the hub's side: its CPU is what cpuTotal counts; the server's is not counted).
    let given = ProcessInfo.processInfo.environment["CUFF_BENCH_PG_URL"]
    if given == nil, let why = TestCluster.unavailable {
        print("Store: the PostgreSQL benchmark is skipped: \(why)")
        return
    }
    // One cluster per benchmark, stopped (and removed) by its teardown.
    var cluster: TestCluster?
    var round = 0
    for batch in [1000, 100, 1] {
        let count = batch == 1 ? 1000 : historySize
        Benchmark(
            "pgship: outbox of \(count) readings, batches of \(batch)",
            configuration: .init(metrics: [.wallClock, .cpuTotal, .mallocCountTotal], maxIterations: 3)
        ) { benchmark, url in
            for _ in benchmark.scaledIterations {
                benchmark.stopMeasurement()
                // Readings no earlier round shipped (the server would skip them as duplicates).
                round += 1
                let box = try PostgresOutboxStore(
                    url: url, outboxPath: dir + "/outbox-\(batch)-\(round).db", background: false,
                    batchSize: batch, warn: SinkWarnings.ignore)
                _ = try box.outbox.insert(contentsOf: benchReadings(count, from: round * historySize))
                benchmark.startMeasurement()
                let r = box.drain()
                benchmark.stopMeasurement()
                precondition(
                    r.failure == nil && r.shipped == count && r.new == count,
                    "shipped \(r.shipped), new \(r.new): \(r.failure.map { "\($0)" } ?? "")")
                try box.close()
                benchmark.startMeasurement()
            }
        } setup: {
            if let given { return try PostgresURL(parsing: given) }
            let made = try TestCluster()
            cluster = made
            return try PostgresURL(parsing: made.url())
        } teardown: {
            cluster = nil
        }
    }
}
