// SPDX-License-Identifier: GPL-2.0-or-later

import Capture
import CuffCore
import CuffTestSupport
import Foundation

/// Hex with spaces/colons → bytes; traps on a typo in a test vector.
func hex(_ s: String) -> [UInt8] {
    guard let b = Hex.decode(s) else { fatalError("bad hex in test: \(s)") }
    return b
}

/// The project's shared/ folder: $CUFF_SHARED_DIR, else shared/ beside the repository (as CI lays it
/// out), else /work/shared.
let sharedDirectory: String = {
    if let dir = ProcessInfo.processInfo.environment["CUFF_SHARED_DIR"] { return dir }
    let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    let beside = repo.deletingLastPathComponent().appendingPathComponent("shared").path
    return FileManager.default.fileExists(atPath: beside + "/vmble") ? beside : "/work/shared"
}()

/// The real two-controller btmon capture shared with the project, and the test programs' results.
let sharedSample = sharedDirectory + "/vmble/samples/capture-all-scenarios.btsnoop"
let sharedResults = sharedDirectory + "/vmble/samples/results-all-scenarios.jsonl"

/// Reads every record of `bytes`; returns the records before the first error and that error.
func readAll(_ bytes: [UInt8], format: CaptureFormat = .auto) -> (records: [HCIRecord], error: CaptureError?) {
    var reader = CaptureReader(source: ArrayByteSource(bytes), format: format)
    var out: [HCIRecord] = []
    do {
        while let r = try reader.next() { out.append(r) }
        return (out, nil)
    } catch {
        return (out, error)
    }
}

/// Runs records through an extractor; returns all events.
func extract(_ records: [HCIRecord], strict: Bool = false) throws -> [CaptureEvent] {
    var x = ATTExtractor(strict: strict)
    var events: [CaptureEvent] = []
    for r in records { try x.consume(r, into: &events) }
    return events
}

/// Builds btsnoop files byte by byte (big-endian header and records).
struct BTSnoopBuilder {
    var w = ByteWriter()
    init(datalink: UInt32, version: UInt32 = 1) {
        w.write(contentsOf: Array("btsnoop".utf8) + [0])
        w.writeBigEndian(version)
        w.writeBigEndian(datalink)
    }
    /// `unixMicros` is converted to btsnoop's year-0 epoch.
    mutating func record(flags: UInt32, unixMicros: Int64, _ payload: [UInt8], originalLength: UInt32? = nil) {
        w.writeBigEndian(originalLength ?? UInt32(payload.count))
        w.writeBigEndian(UInt32(payload.count))
        w.writeBigEndian(flags)
        w.writeBigEndian(UInt32(0))
        w.writeBigEndian(UInt64(unixMicros + 0x00DC_DDB3_0F2F_8000))
        w.write(contentsOf: payload)
    }
    var bytes: [UInt8] { w.bytes }
}

/// Builds classic pcap files in either byte order.
struct PcapBuilder {
    var w = ByteWriter()
    let big: Bool
    let nano: Bool
    init(linkType: UInt32, bigEndian: Bool, nanoseconds: Bool = false) {
        big = bigEndian
        nano = nanoseconds
        u32(nanoseconds ? 0xA1B2_3C4D : 0xA1B2_C3D4)
        u16(2); u16(4)
        u32(0); u32(0); u32(65535); u32(linkType)
    }
    mutating func u16(_ v: UInt16) { big ? w.writeBigEndian(v) : w.write(v) }
    mutating func u32(_ v: UInt32) { big ? w.writeBigEndian(v) : w.write(v) }
    mutating func record(seconds: UInt32, fraction: UInt32, _ data: [UInt8]) {
        u32(seconds); u32(fraction); u32(UInt32(data.count)); u32(UInt32(data.count))
        w.write(contentsOf: data)
    }
    var bytes: [UInt8] { w.bytes }
}

/// Builds pcapng files in either byte order.
struct PcapngBuilder {
    var w = ByteWriter()
    let big: Bool
    init(bigEndian: Bool) {
        big = bigEndian
        var body = ByteWriter()
        Self.u32(&body, big, 0x1A2B_3C4D)
        Self.u16(&body, big, 1); Self.u16(&body, big, 0)
        Self.u32(&body, big, 0xFFFF_FFFF); Self.u32(&body, big, 0xFFFF_FFFF)  // section length -1
        block(0x0A0D_0D0A, body.bytes)
    }
    static func u16(_ w: inout ByteWriter, _ big: Bool, _ v: UInt16) { big ? w.writeBigEndian(v) : w.write(v) }
    static func u32(_ w: inout ByteWriter, _ big: Bool, _ v: UInt32) { big ? w.writeBigEndian(v) : w.write(v) }
    mutating func block(_ type: UInt32, _ body: [UInt8]) {
        let padded = body + [UInt8](repeating: 0, count: (4 - body.count % 4) % 4)
        let length = UInt32(12 + padded.count)
        Self.u32(&w, big, type); Self.u32(&w, big, length)
        w.write(contentsOf: padded)
        Self.u32(&w, big, length)
    }
    /// An IDB; `tsresol` adds an if_tsresol option.
    mutating func interface(linkType: UInt16, tsresol: UInt8? = nil) {
        var b = ByteWriter()
        Self.u16(&b, big, linkType); Self.u16(&b, big, 0); Self.u32(&b, big, 0)
        if let tsresol {
            Self.u16(&b, big, 9); Self.u16(&b, big, 1); b.write(contentsOf: [tsresol, 0, 0, 0])
            Self.u16(&b, big, 0); Self.u16(&b, big, 0)
        }
        block(1, b.bytes)
    }
    mutating func enhancedPacket(interface: UInt32, ticks: UInt64, _ data: [UInt8]) {
        var b = ByteWriter()
        Self.u32(&b, big, interface)
        Self.u32(&b, big, UInt32(ticks >> 32)); Self.u32(&b, big, UInt32(truncatingIfNeeded: ticks))
        Self.u32(&b, big, UInt32(data.count)); Self.u32(&b, big, UInt32(data.count))
        b.write(contentsOf: data)
        b.write(contentsOf: [UInt8](repeating: 0, count: (4 - data.count % 4) % 4))
        block(6, b.bytes)
    }
    /// The obsolete Packet Block (type 2): a 2-byte interface id and a 2-byte drops count.
    mutating func obsoletePacket(interface: UInt16, ticks: UInt64, _ data: [UInt8]) {
        var b = ByteWriter()
        Self.u16(&b, big, interface); Self.u16(&b, big, 0)
        Self.u32(&b, big, UInt32(ticks >> 32)); Self.u32(&b, big, UInt32(truncatingIfNeeded: ticks))
        Self.u32(&b, big, UInt32(data.count)); Self.u32(&b, big, UInt32(data.count))
        b.write(contentsOf: data)
        b.write(contentsOf: [UInt8](repeating: 0, count: (4 - data.count % 4) % 4))
        block(2, b.bytes)
    }
    mutating func simplePacket(_ data: [UInt8]) {
        var b = ByteWriter()
        Self.u32(&b, big, UInt32(data.count))
        b.write(contentsOf: data)
        block(3, b.bytes)
    }
    var bytes: [UInt8] { w.bytes }
}

/// Runs a tool; returns (exit status, stdout+stderr), or nil if the tool isn't installed.
func runTool(_ path: String, _ args: [String]) -> (status: Int32, output: String)? {
    guard FileManager.default.isExecutableFile(atPath: path),
        let r = try? runToCompletion(path, args, timeout: nil, mergeStderr: true)
    else { return nil }
    return (r.status, r.stdout)
}
