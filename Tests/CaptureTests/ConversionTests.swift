// SPDX-License-Identifier: GPL-2.0-or-later

import Capture
import CuffCore
import CuffTestSupport
import Foundation
import Testing

/// Wireshark's `editcap` rewrites a btsnoop file as pcap, nanosecond pcap or pcapng (monitor files
/// become LINKTYPE 254, H4 files LINKTYPE 201). Reading each conversion must give the same records
/// as reading the btsnoop original — a check of our pcap/pcapng readers against files we didn't write.
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/editcap")))
struct ConversionTests {
    static func convert(_ path: String, to format: String) throws -> [HCIRecord] {
        let out = temporaryPath("conv-\(UUID().uuidString).\(format)")
        defer { unlink(out) }
        let r = try #require(runTool("/usr/bin/editcap", ["-F", format, path, out]))
        #expect(r.status == 0, "\(r.output)")
        var reader = try CaptureReader(path: out)
        return try reader.readAll()
    }

    static func sameContent(_ a: [HCIRecord], _ b: [HCIRecord]) -> Bool {
        a.count == b.count
            && zip(a, b).allSatisfy { x, y in
                x.kind == y.kind && x.direction == y.direction && x.adapterIndex == y.adapterIndex
                    && x.payload == y.payload && x.timestamp == y.timestamp
            }
    }

    @Test(.enabled(if: RealCaptureTests.available), arguments: ["pcap", "nsecpcap", "pcapng"])
    func sharedSampleConverted(format: String) throws {
        var reader = try CaptureReader(path: sharedSample)
        let original = try reader.readAll()
        let converted = try Self.convert(sharedSample, to: format)
        #expect(Self.sameContent(original, converted))
        #expect(try extract(converted, strict: true).compactMap(\.att).count == 52)
    }

    @Test(arguments: ["pcap", "pcapng"])
    func ourH4FileConvertedToLinktype201(format: String) throws {
        let path = temporaryPath("h4-\(format).btsnoop")
        defer { unlink(path) }
        var writer = try BTSnoopWriter(path: path, datalink: .uart)
        let records = try recordSession(.uart)
        try writer.write(contentsOf: records)
        _ = try writer.finish()
        let converted = try Self.convert(path, to: format)
        #expect(Self.sameContent(records, converted))
        let att = try extract(converted, strict: true).compactMap(\.att)
        #expect(att.map(\.pdu) == sessionPDUs.map(\.0))
        #expect(att.map(\.direction) == sessionPDUs.map(\.1))
    }
}
