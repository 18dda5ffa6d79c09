// SPDX-License-Identifier: GPL-2.0-or-later
// `CuffBenchmarks store [N]`: the cost of encryption at rest, plain store against encrypted.
import BloodPressure
import CuffCore
import CuffSession
import Foundation
import Sinks

/// `count` distinct readings: values, times and sequence numbers vary, as a cuff's history does.
func benchReadings(_ count: Int) -> [MeasurementRecord] {
    let device = DeviceInfo(address: "AA:BB:CC:DD:EE:FF", name: "BPM-1", manufacturer: "Acme", model: "M7", serial: "SN42", firmware: "1.0")
    return (0..<count).map { i in
        let v = BloodPressureMeasurement(
            unit: .mmHg, systolic: SFloat(Double(100 + i % 60)), diastolic: SFloat(Double(60 + i % 30)),
            meanArterialPressure: SFloat(Double(80 + i % 20)), timestamp: DateTime(unixSeconds: 1_700_000_000 + Int64(i) * 3600),
            pulseRate: SFloat(Double(55 + i % 40)), userID: 1)
        let raw = v.encode()
        let d = try! BloodPressureMeasurement.decode(raw[...])
        let at = EventTime(monotonic: .seconds(Double(i)), wallMicros: (1_700_000_000 + Int64(i) * 3600) * 1_000_000)
        return MeasurementRecord.from(bpm: d.value, warnings: d.warnings, raw: raw, device: device, at: at, stored: false)
    }
}

func benchStore(_ n: Int) {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-store-bench-\(UUID().uuidString)").path
    try! FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let readings = benchReadings(n)
    let key = try! StoreKey.create(path: dir + "/key")
    // Live storing: one reading per commit (fsynced, as a session stores each before confirming it).
    let live = min(n, 2000)
    print("store: \(n) readings; live storing measured on the first \(live) (one commit + fsync each)")
    for (label, k) in [("plain", nil), ("encrypted", key)] as [(String, StoreKey?)] {
        let store = try! SQLiteStore(path: dir + "/\(label).db", key: k, warn: SinkWarnings.ignore)
        let t0 = now()
        for m in readings.prefix(live) { _ = try! store.insert(m) }
        let t1 = now()
        // The rest in one transaction (a bulk load), so history has n readings to read.
        _ = try! store.insert(contentsOf: Array(readings.dropFirst(live)))
        let t2 = now()
        try! store.finish()
        let reader = try! SQLiteStore(path: dir + "/\(label).db", mustExist: true, key: k, warn: SinkWarnings.ignore)
        let t3 = now()
        let back = try! reader.records()
        let t4 = now()
        precondition(back.count == n, "history read \(back.count) of \(n)")
        try! reader.finish()
        let size = (try? FileManager.default.attributesOfItem(atPath: dir + "/\(label).db")[.size] as? Int) ?? 0
        print("\(label.padding(toLength: 9, withPad: " ", startingAt: 0)): live store \(format3((t1 - t0) / Double(live) * 1e6)) µs/reading; "
              + "bulk \(format3(Double(n - live) / max(t2 - t1, 1e-9))) readings/s; history of \(n): \(format3(t4 - t3)) s "
              + "(\(format3((t4 - t3) / Double(n) * 1e6)) µs/reading); file \(size / 1_000_000) MB")
    }
}
