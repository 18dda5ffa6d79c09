// SPDX-License-Identifier: GPL-2.0-or-later
// Decoding and replay: `swift package --package-path Benchmarks benchmark --target Replay`.
// Each benchmark counts heap allocations (package-benchmark's malloc interposer) beside time and
// instructions. CUFF_BENCH_CAPTURE=FILE replays FILE instead of captures/normal.btsnoop (a
// capture from tools/replay/make-capture.py, say).
import Benchmark
import BloodPressure
import Capture
import CuffCore
import CuffSession
import Foundation

/// The repository's root (this file is Benchmarks/Benchmarks/Replay/Replay.swift).
let root: String = {
    var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(4)
    return parts.joined(separator: "/")
}()

let capturePath = ProcessInfo.processInfo.environment["CUFF_BENCH_CAPTURE"] ?? root + "/captures/normal.btsnoop"

/// Every record of `path`, read once (a benchmark replays them from memory).
func records(_ path: String) -> [HCIRecord] {
    do {
        var reader = try CaptureReader(path: path)
        return try reader.readAll()
    } catch {
        fatalError("\(path): \(error)")
    }
}

/// One replay of `records` in process (reader's work done; no serialisation): the records it gave out.
@inline(never)
func replay(_ records: [HCIRecord], _ out: inout [CaptureReplay.Output]) -> Int {
    var replay = CaptureReplay()
    var emitted = 0
    for r in records {
        replay.consume(r, into: &out)
        emitted += out.count
        out.removeAll(keepingCapacity: true)
    }
    replay.finish(into: &out)
    emitted += out.count
    out.removeAll(keepingCapacity: true)
    return emitted
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .instructions, .mallocCountTotal, .throughput],
        maxDuration: .seconds(3), maxIterations: 1_000_000)

    // Full-flag 2A35 (every optional field present, 19 bytes): 0 allocations per decode.
    let value: [UInt8] = [
        0x1E, 0x8A, 0x00, 0x58, 0x00, 0x78, 0x00, 0x00, 0x00, 0x04, 0x11, 0x14, 0x29, 0x3B, 0x3C, 0x00, 0x01, 0x27,
        0x00,
    ]
    Benchmark("decode 2A35 full flags", configuration: .init(scalingFactor: .kilo)) { benchmark in
        let slice = value[...]
        for _ in benchmark.scaledIterations {
            blackHole(try? BloodPressureMeasurement.decode(slice))
        }
    }

    // The whole capture replayed in process: reader's records → extractor → observers → session machines.
    Benchmark("replay in process (\(capturePath.split(separator: "/").last ?? ""))") { benchmark, records in
        var out: [CaptureReplay.Output] = []
        out.reserveCapacity(1024)
        for _ in benchmark.scaledIterations { blackHole(replay(records, &out)) }
    } setup: {
        records(capturePath)
    }

    // One recorded session replayed: the per-session cost, whole and without its cuff-pressure
    // notifications (what a short session of a gateway's log is made of).
    Benchmark("session cost, whole (normal.btsnoop)") { benchmark, records in
        var out: [CaptureReplay.Output] = []
        out.reserveCapacity(1024)
        for _ in benchmark.scaledIterations { blackHole(replay(records, &out)) }
    } setup: {
        records(root + "/captures/normal.btsnoop")
    }
    Benchmark("session cost, without cuff pressure (normal.btsnoop)") { benchmark, records in
        var out: [CaptureReplay.Output] = []
        out.reserveCapacity(1024)
        for _ in benchmark.scaledIterations { blackHole(replay(records, &out)) }
    } setup: {
        records(root + "/captures/normal.btsnoop").filter { r in
            !(r.kind == .aclData && r.payload.count > 8 && r.payload[8] == 0x1B)
        }
    }

    // The replay's first stages alone, from the file: the reader, then the reader and the ATT extractor.
    Benchmark("stage: reader (\(capturePath.split(separator: "/").last ?? ""))") { benchmark in
        for _ in benchmark.scaledIterations {
            var reader = try CaptureReader(path: capturePath)
            var record = HCIRecord(timestamp: .zero, direction: .received, kind: .other(0), payload: [])
            var n = 0
            while try reader.nextFromFile(into: &record) { n += 1 }
            blackHole(n)
        }
    }
    Benchmark("stage: reader + extractor (\(capturePath.split(separator: "/").last ?? ""))") { benchmark in
        var events: [CaptureEvent] = []
        for _ in benchmark.scaledIterations {
            var reader = try CaptureReader(path: capturePath)
            var extractor = ATTExtractor()
            var n = 0
            while let r = try reader.nextFromFile() {
                events.removeAll(keepingCapacity: true)
                try extractor.consume(r, into: &events)
                n += events.count
            }
            blackHole(n)
        }
    }
}
