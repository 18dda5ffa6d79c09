// SPDX-License-Identifier: GPL-2.0-or-later

import Capture
import CuffCore
import Testing

/// Corrupted input never crashes or hangs: every `next()` either makes progress or ends the stream.
@Suite struct FuzzTests {
    /// A small deterministic generator (SplitMix64), so failures reproduce.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static func seeds() throws -> [[UInt8]] {
        var monitor = BTSnoopWriter(sink: ArrayByteSink(), datalink: .monitor)
        try monitor.write(contentsOf: try recordSession(.monitor))
        var uart = BTSnoopWriter(sink: ArrayByteSink(), datalink: .uart)
        try uart.write(contentsOf: try recordSession(.uart))
        var ng = PcapngBuilder(bigEndian: false)
        ng.interface(linkType: 254)
        ng.interface(linkType: 201, tsresol: 9)
        for (i, r) in try recordSession(.uart).enumerated() {
            let h4 = r.kind.h4Type!
            ng.enhancedPacket(interface: 1, ticks: UInt64(i), [0, 0, 0, r.direction == .sent ? 0 : 1, h4] + r.payload)
        }
        var pcap = PcapBuilder(linkType: 256, bigEndian: true)
        pcap.record(seconds: 0, fraction: 0, LL.connectInd)
        pcap.record(
            seconds: 0, fraction: 1, LL.data(llid: 2, sn: 0, nesn: 0, toPeripheral: true, hex("03 00 04 00 02 05 02")))
        return [try monitor.finish().bytes, try uart.finish().bytes, ng.bytes, pcap.bytes]
    }

    @Test func mutatedFilesTerminateWithoutCrashing() throws {
        var rng = SplitMix(state: 0xC0FF_EE)
        for seed in try Self.seeds() {
            for _ in 0..<400 {
                var bytes = seed
                for _ in 0..<Int.random(in: 1...6, using: &rng) {
                    let i = Int.random(in: 0..<bytes.count, using: &rng)
                    switch Int.random(in: 0..<3, using: &rng) {
                    case 0: bytes[i] = UInt8.random(in: 0...255, using: &rng)
                    case 1: bytes[i] ^= 0x80
                    default: bytes.removeSubrange(i..<min(bytes.count, i + Int.random(in: 1...8, using: &rng)))
                    }
                    if bytes.isEmpty { break }
                }
                var reader = CaptureReader(
                    source: ArrayByteSource(bytes), chunkSize: Int.random(in: 1...64, using: &rng))
                var extractor = ATTExtractor()
                var calls = 0
                var lastOffset: Int64 = -1
                while calls < bytes.count + 10 {
                    calls += 1
                    do {
                        guard let record = try reader.next() else { break }
                        _ = try extractor.consume(record)
                    } catch  where error.isRecoverable {
                        // must have moved on
                    } catch {
                        #expect(try reader.next() == nil)  // fatal errors end the stream
                        break
                    }
                    #expect(reader.offset > lastOffset, "no progress")
                    lastOffset = reader.offset
                }
                #expect(calls < bytes.count + 10, "reader did not finish")
            }
        }
    }

    @Test func randomBytesAreRejectedQuickly() {
        var rng = SplitMix(state: 42)
        for n in 1..<200 {
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let r = readAll(bytes)
            #expect(r.records.isEmpty)
            #expect(r.error == CaptureError(n < 4 ? .truncatedHeader : .badMagic), "\(n) random bytes")
            #expect(r.error?.offset == 0)
        }
    }
}
