// SPDX-License-Identifier: GPL-2.0-or-later
// Benchmarks: `swift run -c release CuffBenchmarks [decode|all]`.
import BloodPressure
import CMallocCounter
import CuffCore
import Transport
#if canImport(Glibc)
import Glibc
#endif

/// Seconds on the monotonic clock.
func now() -> Double { Double(MonotonicClock.now().nanoseconds) / 1e9 }

@inline(never)
func blackHole<T>(_ x: T) { withExtendedLifetime(x) {} }

/// Full-flag 2A35 (V1: every optional field present, 19 bytes).
func benchDecode() {
    let value: [UInt8] = [0x1E, 0x8A, 0x00, 0x58, 0x00, 0x78, 0x00, 0x00, 0x00, 0x04, 0x11, 0x14, 0x29, 0x3B, 0x3C, 0x00, 0x01, 0x27, 0x00]
    let slice = value[...]
    var checksum: UInt64 = 0
    // Warm up.
    for _ in 0..<100_000 {
        if let d = try? BloodPressureMeasurement.decode(slice) { checksum &+= UInt64(d.value.systolic.rawValue) }
    }
    // The counter must see a real allocation, or "0 per decode" would mean nothing.
    let probeBefore = cuff_malloc_count()
    blackHole(Array(repeating: UInt8(1), count: Int(checksum & 0xFF) + 64))
    precondition(cuff_malloc_count() > probeBefore, "malloc counter is not interposed")
    let iterations = 20_000_000
    let allocsBefore = cuff_malloc_count()
    let t0 = now()
    for _ in 0..<iterations {
        do {
            let d = try BloodPressureMeasurement.decode(slice)
            checksum &+= UInt64(d.value.systolic.rawValue) &+ UInt64(d.value.status!.rawValue) &+ UInt64(d.warnings.count)
        } catch {
            fatalError("\(error)")
        }
    }
    let t1 = now()
    let allocs = cuff_malloc_count() - allocsBefore
    blackHole(checksum)
    let rate = Double(iterations) / (t1 - t0)
    print("decode 2A35 full flags: \(iterations) decodes in \(String(format3(t1 - t0))) s = \(String(format3(rate / 1e6))) million decodes/s (one core)")
    print("decode 2A35 full flags: heap allocations: \(allocs) total, \(String(format3(Double(allocs) / Double(iterations)))) per decode")
}

func format3(_ x: Double) -> String {
    let r = (x * 1000).rounded() / 1000
    return String(r)
}

let args = Array(CommandLine.arguments.dropFirst())
let which = args.first ?? "all"
switch which {
case "decode", "all":
    benchDecode()
case "make-capture" where args.count >= 4:
    // --notifications N: keep each session's first N cuff-pressure notifications (a session-heavy capture).
    var rest = Array(args[1...])
    var keep: Int?
    if let i = rest.firstIndex(of: "--notifications"), i + 1 < rest.count {
        keep = Int(rest[i + 1])
        rest.removeSubrange(i...(i + 1))
    }
    // --short: bonded reconnects (no discovery) after each input's first copy; --sessions N: N copies at most.
    let short = rest.contains("--short")
    rest.removeAll { $0 == "--short" }
    var limit: Int?
    if let i = rest.firstIndex(of: "--sessions"), i + 1 < rest.count {
        limit = Int(rest[i + 1])
        rest.removeSubrange(i...(i + 1))
    }
    makeCapture(out: rest[0], megabytes: Int(rest[1]) ?? 200, inputs: Array(rest[2...]), notifications: keep, short: short, sessions: limit)
case "session-cost" where args.count >= 3:
    benchSessionCost(args[1], Int(args[2]) ?? 1000, onlyGeneric: args.count > 3 && args[3] == "generic")
case "layouts":
    printLayouts()
case "stages" where args.count == 2:
    benchReplayStages(args[1])
case "store":
    benchStore(args.count > 1 ? Int(args[1]) ?? 100_000 : 100_000)
case "replay" where args.count == 2:
    benchReplay(args[1])
case "pgship":
    benchPGShip(args.count > 1 ? Int(args[1]) ?? 100_000 : 100_000, url: args.count > 2 ? args[2] : nil)
default:
    print("usage: CuffBenchmarks [decode|all] | store [N] | pgship [N] [postgres://URL] | make-capture [--notifications N] [--short] [--sessions N] OUT.btsnoop MEGABYTES IN.btsnoop... | replay FILE")
    exit(2)
}
