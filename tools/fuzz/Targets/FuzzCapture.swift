// libFuzzer target: the capture readers (btsnoop, pcap, pcapng) with CaptureReplay behind it.
// Byte 0 picks the format (auto, btsnoop, pcap, pcapng); the rest is the file. Outputs are dropped.
// Every capture goes through CaptureReplay.replay exactly as `cuff replay` drives it (the reader's
// zero-copy path), whatever its timestamps: the traps the first runs found on timestamps near the
// ends of Int64 nanoseconds (corpus/FuzzCapture/crash-timestamp-*) are fixed, and stay as seeds.
import Capture
import CuffCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let formats = CaptureFormat.allCases
    let format = formats[Int(data[0]) % formats.count]
    let file = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    var reader = CaptureReader(source: ArrayByteSource(file), format: format, chunkSize: 4096)
    do { try reader.readHeader() } catch { return 0 }
    var replay = CaptureReplay()
    var out: [CaptureReplay.Output] = []
    func drop(_ out: inout [CaptureReplay.Output]) {
        for o in out { _ = String(describing: o) }
        out.removeAll(keepingCapacity: true)
    }
    let ending = replay.replay(&reader, into: &out, batch: 64) { out in
        drop(&out)
        return true
    }
    switch ending {
    case .end, .stopped: replay.finish(into: &out)
    case let .fault(e): replay.finish(after: e, into: &out)
    }
    drop(&out)
    return 0
}
