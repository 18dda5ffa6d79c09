// SPDX-License-Identifier: GPL-2.0-or-later

import Capture
import CuffCore
import Foundation
import Testing

/// The pcap and pcapng readers lend a record whole in their buffer (no copy), as the btsnoop
/// reader does: every record and every error must be what the checked path gives, on the committed
/// captures rewritten as pcap and pcapng (both byte orders, µs and ns, link types 254 and 201),
/// cut at every length, and damaged.
@Suite("pcap and pcapng short paths")
struct PcapShortPathTests {
    /// The committed captures' records (monitor datalink: several controllers, both directions).
    static let sources: [[HCIRecord]] = ShortPathTests.files.map { path in
        var reader = try! CaptureReader(path: path)
        return try! reader.readAll()
    }

    /// `records` as a pcap file of link type 254 (monitor) or 201 (H4 with direction).
    static func pcap(_ records: [HCIRecord], linkType: UInt32, bigEndian: Bool, nanoseconds: Bool) -> [UInt8] {
        var b = PcapBuilder(linkType: linkType, bigEndian: bigEndian, nanoseconds: nanoseconds)
        for r in records {
            let ns = r.timestamp.nanoseconds
            let fraction = nanoseconds ? ns % 1_000_000_000 : ns % 1_000_000_000 / 1000
            b.record(seconds: UInt32(ns / 1_000_000_000), fraction: UInt32(fraction), packet(r, linkType: linkType))
        }
        return b.bytes
    }

    static func packet(_ r: HCIRecord, linkType: UInt32) -> [UInt8] {
        var w = ByteWriter()
        if linkType == 254 {
            w.writeBigEndian(r.adapterIndex)
            w.writeBigEndian(r.kind.monitorOpcode(direction: r.direction)!)
        } else {
            w.writeBigEndian(UInt32(r.direction == .sent ? 0 : 1))
            w.write(r.kind.h4Type!)
        }
        w.write(contentsOf: r.payload)
        return w.bytes
    }

    /// `records` as pcapng: the packets on an interface of link type 254 as Enhanced Packet Blocks
    /// (every seventh with an option after its data), with an interface of a link type we do not
    /// decode and a packet on it, a Simple Packet Block, an Interface Statistics Block and a second
    /// section along the way.
    static func pcapng(_ records: [HCIRecord], bigEndian: Bool) -> [UInt8] {
        var b = PcapngBuilder(bigEndian: bigEndian)
        b.interface(linkType: 254, tsresol: 9)
        b.interface(linkType: 1)
        for (i, r) in records.enumerated() {
            let data = packet(r, linkType: 254)
            let ticks = UInt64(r.timestamp.nanoseconds)
            if i % 7 == 3 {
                var body = ByteWriter()
                PcapngBuilder.u32(&body, bigEndian, 0)
                PcapngBuilder.u32(&body, bigEndian, UInt32(ticks >> 32))
                PcapngBuilder.u32(&body, bigEndian, UInt32(truncatingIfNeeded: ticks))
                PcapngBuilder.u32(&body, bigEndian, UInt32(data.count))
                PcapngBuilder.u32(&body, bigEndian, UInt32(data.count + 3))
                body.write(contentsOf: data)
                body.write(contentsOf: [UInt8](repeating: 0, count: (4 - data.count % 4) % 4))
                // opt_comment "ok", then opt_endofopt.
                PcapngBuilder.u16(&body, bigEndian, 1)
                PcapngBuilder.u16(&body, bigEndian, 2)
                body.write(contentsOf: [0x6F, 0x6B, 0, 0, 0, 0, 0, 0])
                b.block(6, body.bytes)
            } else {
                b.enhancedPacket(interface: 0, ticks: ticks, data)
            }
            switch i {
            case 5: b.enhancedPacket(interface: 1, ticks: ticks, [1, 2, 3, 4, 5, 6])
            case 9: b.simplePacket(data)
            case 11: b.block(5, [UInt8](repeating: 0, count: 20))
            case records.count / 2:
                // A new section: its interfaces replace the first section's.
                b.w.write(contentsOf: PcapngBuilder(bigEndian: bigEndian).bytes)
                b.interface(linkType: 254, tsresol: 9)
            default: break
            }
        }
        return b.bytes
    }

    /// Every record, or error, a reader gives until the end, a non-recoverable error, or `limit`
    /// steps; `inPlace` reads with `next(into:)` (the lending path), else with `next()`.
    static func read(_ bytes: [UInt8], inPlace: Bool, chunkSize: Int, limit: Int = 1_000_000) -> [Result<
        HCIRecord, CaptureError
    >] {
        var reader = CaptureReader(source: ArrayByteSource(bytes), chunkSize: chunkSize)
        var record = HCIRecord(timestamp: .zero, direction: .received, kind: .other(0), payload: [])
        var out: [Result<HCIRecord, CaptureError>] = []
        for _ in 0..<limit {
            do {
                if inPlace {
                    guard try reader.next(into: &record) else { break }
                    out.append(.success(record))
                } else {
                    guard let r = try reader.next() else { break }
                    out.append(.success(r))
                }
            } catch {
                out.append(.failure(error))
                if !error.isRecoverable { break }
            }
        }
        return out
    }

    /// Where `got` first differs from `expected` (a record, or an error's code or offset), or nil
    /// when they are the same.
    static func difference(_ got: [Result<HCIRecord, CaptureError>], _ expected: [Result<HCIRecord, CaptureError>])
        -> String?
    {
        for (i, (x, y)) in zip(got, expected).enumerated() {
            let same: Bool
            switch (x, y) {
            case let (.success(r), .success(s)): same = r == s
            case let (.failure(e), .failure(f)): same = e.code == f.code && e.offset == f.offset
            default: same = false
            }
            if !same { return "step \(i): got \(x), expected \(y)" }
        }
        return got.count == expected.count ? nil : "got \(got.count) steps, expected \(expected.count)"
    }

    /// The files each source becomes.
    static func files(_ records: [HCIRecord]) -> [(name: String, bytes: [UInt8])] {
        var out: [(String, [UInt8])] = []
        for big in [false, true] {
            for nano in [false, true] {
                let bytes = pcap(records, linkType: 254, bigEndian: big, nanoseconds: nano)
                out.append(("pcap 254 big \(big) ns \(nano)", bytes))
            }
            out.append(("pcapng big \(big)", pcapng(records, bigEndian: big)))
        }
        let single = records.filter { $0.adapterIndex == records.first?.adapterIndex && $0.kind.h4Type != nil }
        out.append(("pcap 201", pcap(single, linkType: 201, bigEndian: false, nanoseconds: false)))
        return out
    }

    @Test func lentRecordsEqualCheckedOnes() {
        var records = 0
        for source in Self.sources {
            for (name, bytes) in Self.files(source) {
                let expected = Self.read(bytes, inPlace: false, chunkSize: 64 * 1024)
                // (Only pcapng has an error: its interface of a link type we do not decode.)
                let failures = expected.filter { if case .failure = $0 { true } else { false } }.count
                #expect(failures == (name.hasPrefix("pcapng") ? 1 : 0), "\(name)")
                for chunk in [64 * 1024, 1000, 23] {
                    let got = Self.read(bytes, inPlace: true, chunkSize: chunk)
                    #expect(Self.difference(got, expected) == nil, "\(name), chunk \(chunk)")
                }
                records += expected.count
            }
        }
        #expect(records > 50_000)
    }

    @Test func everyPrefixGivesTheCheckedPathsRecordsAndError() {
        let source = Array(Self.sources[0].prefix(60))
        for (name, bytes) in Self.files(source) {
            for n in 0...bytes.count {
                let prefix = Array(bytes.prefix(n))
                let expected = Self.read(prefix, inPlace: false, chunkSize: 64 * 1024)
                let got = Self.read(prefix, inPlace: true, chunkSize: 64 * 1024)
                #expect(Self.difference(got, expected) == nil, "\(name), prefix \(n)")
            }
        }
    }

    @Test func damagedFilesGiveTheCheckedPathsRecordsAndErrors() {
        // 40 bytes changed at random places (fixed seed), 30 times per file: lengths, trailers,
        // interface ids, pseudo-headers and timestamps go wrong in every way the checked path names.
        var rng = FuzzTests.SplitMix(state: 26)
        var errors = 0
        for (name, bytes) in Self.files(Array(Self.sources[0].prefix(400))) {
            for round in 0..<30 {
                var b = bytes
                for _ in 0..<40 {
                    let i = Int(rng.next() % UInt64(b.count - 24)) + 24
                    b[i] = UInt8(truncatingIfNeeded: rng.next())
                }
                let expected = Self.read(b, inPlace: false, chunkSize: 64 * 1024, limit: 5000)
                for chunk in [64 * 1024, 97] {
                    let got = Self.read(b, inPlace: true, chunkSize: chunk, limit: 5000)
                    #expect(Self.difference(got, expected) == nil, "\(name), round \(round), chunk \(chunk)")
                }
                errors += expected.filter { if case .failure = $0 { true } else { false } }.count
            }
        }
        #expect(errors > 100)
    }

    /// A replay of the pcap and pcapng files (records lent to it) gives the outputs of a replay
    /// that consumes every record the checked path reads.
    @Test func lentRecordsReplayAsCopiedOnes() throws {
        for source in Self.sources {
            for (name, bytes) in Self.files(source) where !name.contains("201") {
                var one = CaptureReplay()
                var expected: [CaptureReplay.Output] = []
                for result in Self.read(bytes, inPlace: false, chunkSize: 64 * 1024) {
                    switch result {
                    case let .success(r): one.consume(r, into: &expected)
                    case let .failure(e): expected.append(CaptureReplay.skipped(e))  // (all recoverable here)
                    }
                }
                for chunk in [64 * 1024, 173] {
                    var reader = CaptureReader(source: ArrayByteSource(bytes), chunkSize: chunk)
                    var replay = CaptureReplay()
                    var got: [CaptureReplay.Output] = []
                    var out: [CaptureReplay.Output] = []
                    let ending = replay.replay(&reader, into: &out) { o in
                        got += o
                        o.removeAll()
                        return true
                    }
                    // (A recoverable error, the unknown interface's, comes as a notice in its place.)
                    #expect(
                        expected.contains { if case .notice = $0 { true } else { false } } == name.hasPrefix("pcapng"))
                    #expect(ending == .end, "\(name)")
                    #expect(got == expected, "\(name), chunk \(chunk)")
                    #expect(replay.sessions == one.sessions && replay.measurements == one.measurements)
                }
            }
        }
    }
}
