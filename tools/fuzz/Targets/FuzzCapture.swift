// libFuzzer target: the capture readers (btsnoop, pcap, pcapng) with CaptureReplay behind it.
// Byte 0 picks the format (auto, btsnoop, pcap, pcapng); the rest is the file. Outputs are dropped.
//
// Known and left to their owner (wt-a, timestamp overflow in replay): timestamps near the ends of
// Int64 nanoseconds trap in SessionObserver.eventTime (`(ns - 999) / 1000` within 999 ns of
// Int64.min), in the session's deadlines (`at.monotonic + timeout`, CuffSessionMachine:202 and the
// other `+ window` sites, near Int64.max) and in the progress `elapsed` subtraction (two timestamps
// more than 292 years apart, CuffSessionMachine:601). So that they do not hide everything else, a
// capture holding a timestamp outside ±2^61 ns (1897…2043) is replayed record by record with its
// timestamps clamped into that range; every other capture goes through CaptureReplay.replay exactly
// as `cuff replay` drives it (the reader's zero-copy path).
import Capture
import CuffCore

let saneTimestamps = -(Int64(1) << 61)...(Int64(1) << 61)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let formats = CaptureFormat.allCases
    let format = formats[Int(data[0]) % formats.count]
    let file = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    func reader() -> CaptureReader<ArrayByteSource>? {
        var r = CaptureReader(source: ArrayByteSource(file), format: format, chunkSize: 4096)
        do { try r.readHeader() } catch { return nil }
        return r
    }
    guard var scan = reader() else { return 0 }
    var knownTrap = false
    var fault: CaptureError?
    scanning: while true {
        do {
            guard let record = try scan.next() else { break }
            if !saneTimestamps.contains(record.timestamp.nanoseconds) { knownTrap = true }
        } catch {
            if !error.isRecoverable { fault = error; break scanning }
        }
    }

    var replay = CaptureReplay()
    var out: [CaptureReplay.Output] = []
    func drop(_ out: inout [CaptureReplay.Output]) {
        for o in out { _ = String(describing: o) }
        out.removeAll(keepingCapacity: true)
    }
    if knownTrap {
        var r = reader()!
        while true {
            do {
                guard var record = try r.next() else { break }
                record.timestamp = Timestamp(nanoseconds: min(max(record.timestamp.nanoseconds, saneTimestamps.lowerBound), saneTimestamps.upperBound))
                replay.consume(record, into: &out)
                drop(&out)
            } catch {
                if !error.isRecoverable { break }
            }
        }
        if let fault { replay.finish(after: fault, into: &out) } else { replay.finish(into: &out) }
    } else {
        var r = reader()!
        let ending = replay.replay(&r, into: &out, batch: 64) { out in
            drop(&out)
            return true
        }
        switch ending {
        case .end, .stopped: replay.finish(into: &out)
        case let .fault(e): replay.finish(after: e, into: &out)
        }
    }
    drop(&out)
    return 0
}
