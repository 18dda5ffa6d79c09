// SPDX-License-Identifier: GPL-2.0-or-later

import Capture
import CuffCore
import Testing

/// A source that serves `bytes`, then (if `endless`) zeros forever, and remembers the largest read
/// it was asked for — to show a reader never sizes a read (or a buffer) by an untrusted length.
struct MeteredSource: ByteSource {
    var bytes: [UInt8]
    var endless = true
    var position = 0
    var largestRequest = 0

    mutating func read(into buffer: inout [UInt8], maxCount: Int) throws(CaptureError) -> Int {
        largestRequest = max(largestRequest, maxCount)
        let real = max(0, min(maxCount, bytes.count - position))
        buffer.append(contentsOf: bytes[min(position, bytes.count)..<(min(position, bytes.count) + real)])
        var n = real
        if endless && n < maxCount {
            buffer.append(contentsOf: repeatElement(0, count: maxCount - n))
            n = maxCount
        }
        position += n
        return n
    }
}

@Suite struct BadInputTests {
    static func btsnoopFile() -> (bytes: [UInt8], recordEnds: [Int]) {
        var b = BTSnoopBuilder(datalink: 2001)
        var ends: [Int] = []
        b.record(flags: 2, unixMicros: 1, hex("03 0c 00"))
        ends.append(b.bytes.count)
        b.record(flags: 3, unixMicros: 2, hex("0e 04 01 03 0c 00"))
        ends.append(b.bytes.count)
        b.record(flags: 5, unixMicros: 3, hex("40 20 07 00 03 00 04 00 02 05 02"))
        ends.append(b.bytes.count)
        return (b.bytes, ends)
    }

    static func pcapFile(bigEndian: Bool) -> (bytes: [UInt8], recordEnds: [Int]) {
        var b = PcapBuilder(linkType: 254, bigEndian: bigEndian)
        var ends: [Int] = []
        b.record(seconds: 1, fraction: 0, hex("00 00 00 02 03 0c 00"))
        ends.append(b.bytes.count)
        b.record(seconds: 2, fraction: 0, hex("00 00 00 03 0e 04 01 03 0c 00"))
        ends.append(b.bytes.count)
        return (b.bytes, ends)
    }

    static func pcapngFile(bigEndian: Bool) -> (bytes: [UInt8], recordEnds: [Int], blockStarts: [Int]) {
        var b = PcapngBuilder(bigEndian: bigEndian)
        var starts = [0, b.bytes.count]
        b.interface(linkType: 254)
        starts.append(b.bytes.count)
        var ends: [Int] = []
        b.enhancedPacket(interface: 0, ticks: 1, hex("00 00 00 02 03 0c 00"))
        ends.append(b.bytes.count)
        starts.append(b.bytes.count)
        b.enhancedPacket(interface: 0, ticks: 2, hex("00 00 00 03 0e 04 01 03 0c 00"))
        ends.append(b.bytes.count)
        return (b.bytes, ends, starts)
    }

    /// Cutting a file at `cut` must yield the records that end at or before the cut, then exactly one
    /// error naming the offset where the cut record began (or nothing, at a record boundary).
    static func checkEveryCut(_ bytes: [UInt8], fileHeader: Int, recordEnds: [Int], recordStarts: [Int]) {
        let full = readAll(bytes)
        #expect(full.error == nil)
        #expect(full.records.count == recordEnds.count)
        for cut in 0..<bytes.count {
            var reader = CaptureReader(source: ArrayByteSource(Array(bytes[0..<cut])))
            var got: [HCIRecord] = []
            var errors: [CaptureError] = []
            for _ in 0..<(recordEnds.count + 3) {
                do {
                    guard let r = try reader.next() else { break }
                    got.append(r)
                } catch {
                    errors.append(error)
                }
            }
            let complete = recordEnds.filter { $0 <= cut }.count
            #expect(got == Array(full.records.prefix(complete)), "cut at \(cut)")
            let boundary = cut >= fileHeader && (recordStarts + [bytes.count]).contains(cut)
            if boundary {
                #expect(errors.isEmpty, "cut at boundary \(cut)")
                continue
            }
            guard errors.count == 1, let e = errors.first else {
                Issue.record("cut at \(cut): expected exactly one error, got \(errors)")
                continue
            }
            if cut < fileHeader {
                #expect(e.code == .truncatedHeader, "cut at \(cut): \(e)")
                #expect(e.offset == 0)
            } else {
                let start = recordStarts.last { $0 <= cut }!
                #expect(e.offset == Int64(start), "cut at \(cut): \(e)")
                #expect(e.code == .truncatedHeader || e.code == .truncatedRecord, "cut at \(cut): \(e)")
            }
        }
    }

    @Test func btsnoopTruncatedAtEveryOffset() {
        let (bytes, ends) = Self.btsnoopFile()
        Self.checkEveryCut(bytes, fileHeader: 16, recordEnds: ends, recordStarts: [16] + ends.dropLast())
        // Cut inside a record header vs. inside its body.
        #expect(readAll(Array(bytes[0..<(16 + 10)])).error == CaptureError(.truncatedHeader))
        #expect(readAll(Array(bytes[0..<(16 + 25)])).error == CaptureError(.truncatedRecord))
    }

    @Test(arguments: [false, true]) func pcapTruncatedAtEveryOffset(bigEndian: Bool) {
        let (bytes, ends) = Self.pcapFile(bigEndian: bigEndian)
        Self.checkEveryCut(bytes, fileHeader: 24, recordEnds: ends, recordStarts: [24] + ends.dropLast())
    }

    @Test(arguments: [false, true]) func pcapngTruncatedAtEveryOffset(bigEndian: Bool) {
        let (bytes, ends, starts) = Self.pcapngFile(bigEndian: bigEndian)
        // The SHB is the "file header"; a cut in the IDB names the IDB's offset.
        Self.checkEveryCut(bytes, fileHeader: 1, recordEnds: ends, recordStarts: starts)
    }

    @Test func badMagic() {
        let r = readAll(Array("GIF89a.......................".utf8))
        #expect(r.error == CaptureError(.badMagic))
        #expect(r.error?.offset == 0)
        #expect(r.records.isEmpty)
        #expect(readAll([]).error == CaptureError(.truncatedHeader))
    }

    @Test func badBTSnoopHeaderFields() {
        var v2 = BTSnoopBuilder(datalink: 2001, version: 2)
        v2.record(flags: 2, unixMicros: 0, [1])
        #expect(readAll(v2.bytes).error == CaptureError(.unsupportedVersion))
        #expect(readAll(v2.bytes).error?.offset == 8)
        let bcsp = BTSnoopBuilder(datalink: 1003)
        #expect(readAll(bcsp.bytes).error == CaptureError(.unknownDatalink))
        #expect(readAll(bcsp.bytes).error?.offset == 12)
    }

    @Test func gigabyteRecordIsRejectedWithoutAllocating() throws {
        var b = BTSnoopBuilder(datalink: 2001)
        b.record(flags: 2, unixMicros: 0, hex("03 0c 00"))
        let goodEnd = b.bytes.count
        // A record header claiming 0xC0000000 (3 GiB) included bytes.
        var w = ByteWriter()
        w.writeBigEndian(UInt32(0xC000_0000)); w.writeBigEndian(UInt32(0xC000_0000))
        w.writeBigEndian(UInt32(2)); w.writeBigEndian(UInt32(0)); w.writeBigEndian(UInt64(0))
        var reader = CaptureReader(source: MeteredSource(bytes: b.bytes + w.bytes), chunkSize: 4096)
        #expect(try reader.next()?.payload == hex("03 0c 00"))
        #expect(reader.source.largestRequest <= 4096)
        do {
            _ = try reader.next()
            Issue.record("expected oversize_record")
        } catch {
            #expect(error.code == .oversizeRecord)
            #expect(error.offset == Int64(goodEnd))
            #expect(error.message.contains("3221225472"))
        }
        #expect(try reader.next() == nil)  // fatal: the reader stops
    }

    @Test func oversizeLimitIsExact() {
        for (length, ok) in [(HCIRecord.maximumPayloadLength, true), (HCIRecord.maximumPayloadLength + 1, false)] {
            var b = BTSnoopBuilder(datalink: 2001)
            b.record(flags: 12, unixMicros: 0, [UInt8](repeating: 0x41, count: length))
            let r = readAll(b.bytes)
            #expect((r.error == nil) == ok)
            if !ok { #expect(r.error == CaptureError(.oversizeRecord)) }
        }
    }

    @Test func oversizePcapAndPcapngRecords() {
        var p = PcapBuilder(linkType: 201, bigEndian: false)
        p.u32(0); p.u32(0); p.u32(0x7FFF_FFFF); p.u32(0x7FFF_FFFF)
        let pr = readAll(p.bytes)
        #expect(pr.error == CaptureError(.oversizeRecord))
        #expect(pr.error?.offset == 24)

        var g = PcapngBuilder(bigEndian: false)
        g.interface(linkType: 201)
        let at = g.bytes.count
        g.w.write(UInt32(6)); g.w.write(UInt32(0x4000_0000))  // a 1 GiB EPB
        let gr = readAll(g.bytes)
        #expect(gr.error == CaptureError(.oversizeRecord))
        #expect(gr.error?.offset == Int64(at))
    }

    @Test func hugeUnknownPcapngBlockIsSkippedInChunks() throws {
        var g = PcapngBuilder(bigEndian: false)
        g.interface(linkType: 201)
        // An unknown block claiming 256 MiB: skipped by streaming, never buffered; the file then ends.
        g.w.write(UInt32(0x0BAD)); g.w.write(UInt32(256 << 20))
        var reader = CaptureReader(source: MeteredSource(bytes: g.bytes, endless: false), chunkSize: 4096)
        #expect(throws: CaptureError(.truncatedRecord)) { _ = try reader.next() }
        #expect(reader.source.largestRequest <= 4096)
    }
}
