// SPDX-License-Identifier: GPL-2.0-or-later
// `CuffBenchmarks pgship [N] [URL]`: a full outbox shipped to PostgreSQL, readings per second and
// the hub's CPU per reading. Without URL, a throwaway local cluster (Debian's server binaries,
// as the tests start it) is made and removed.
import CuffCore
import CuffSession
import Foundation
import PostgresStore
import PostgresTestCluster
import Sinks
import Transport

#if canImport(Glibc)
import Glibc
#endif

/// This process's CPU time (user + system), in seconds.
func cpuSeconds() -> Double {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6
}

/// CPU seconds (user + system) of process `pid`, from /proc (0 when unreadable).
func processCPUSeconds(_ pid: Int32) -> Double {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = text.lastIndex(of: ")") else { return 0 }
    let fields = text[text.index(after: close)...].split(separator: " ")
    // After the command: state is field 3, utime 14 and stime 15 (1-based in proc(5)).
    guard fields.count > 13, let u = Double(fields[11]), let s = Double(fields[12]) else { return 0 }
    return (u + s) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

func benchPGShip(_ n: Int, url given: String?) {
    var cluster: TestCluster?
    let urlText: String
    if let given {
        urlText = given
    } else {
        if let why = TestCluster.unavailable { print("pgship: \(why)"); exit(2) }
        cluster = try! TestCluster()
        urlText = cluster!.url()
    }
    let url = try! PostgresURL(parsing: urlText)
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-pgship-\(UUID().uuidString)").path
    try! FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    print("pgship: \(n) readings from a full outbox to \(url) (PostgreSQL on this machine)")
    var round = 0
    var start = 0
    for batch in [1000, 100, 1] {
        let count = batch == 1 ? min(n, 5000) : n
        round += 1
        // Readings no earlier round shipped (the server would skip them as duplicates).
        let readings = benchReadings(start + count).suffix(count)
        start += count
        let path = dir + "/outbox\(round).db"
        let box = try! PostgresOutboxStore(url: url, outboxPath: path, background: false, batchSize: batch, warn: SinkWarnings.ignore)
        _ = try! box.outbox.insert(contentsOf: Array(readings))
        let backend = try! box.server.backendPID()
        let s0 = processCPUSeconds(backend)
        let c0 = cpuSeconds(), t0 = now()
        let r = box.drain()
        let t1 = now(), c1 = cpuSeconds()
        let s1 = processCPUSeconds(backend)
        precondition(r.failure == nil && r.shipped == count && r.new == count, "shipped \(r.shipped), new \(r.new): \(r.failure.map { "\($0)" } ?? "")")
        precondition(try! box.outbox.count() == 0)
        try! box.close()
        print("batch \(String(batch).padding(toLength: 4, withPad: " ", startingAt: 0)): \(count) readings in \(format3(t1 - t0)) s = "
              + "\(Int((Double(count) / (t1 - t0)).rounded())) readings/s; hub CPU \(format3((c1 - c0) / Double(count) * 1e6)) µs/reading, "
              + "server CPU \(format3((s1 - s0) / Double(count) * 1e6)) µs/reading "
              + "(\(format3((t1 - t0) / Double(count) * 1e6)) µs wall)")
        Sys.flushStandardIO()
    }
    // Where a 1000-reading batch's time goes: reading the outbox, the server's transaction, the removal.
    let readings = benchReadings(start + 20_000).suffix(20_000)
    let box = try! PostgresOutboxStore(url: url, outboxPath: dir + "/phases.db", background: false, warn: SinkWarnings.ignore)
    _ = try! box.outbox.insert(contentsOf: Array(readings))
    var tRead = 0.0, tShip = 0.0, tRemove = 0.0
    for _ in 0..<20 {
        let t0 = now()
        let batch = try! box.outbox.pending(limit: 1000)
        let t1 = now()
        _ = try! box.server.ship(batch)
        let t2 = now()
        try! box.outbox.remove(ids: batch.map(\.id))
        let t3 = now()
        tRead += t1 - t0; tShip += t2 - t1; tRemove += t3 - t2
    }
    try! box.close()
    print("per 1000-reading batch: outbox read \(format3(tRead / 20 * 1e3)) ms, server transaction \(format3(tShip / 20 * 1e3)) ms, outbox removal \(format3(tRemove / 20 * 1e3)) ms")
    let server = PostgresServer(url: url)
    print("server holds \(try! server.count()) readings")
    server.disconnect()
    _ = cluster
}
