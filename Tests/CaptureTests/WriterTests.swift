// SPDX-License-Identifier: GPL-2.0-or-later

import Capture
import CuffCore
import CuffTestSupport
import Foundation
import Testing

/// A blood-pressure session as ATT PDUs: MTU exchange, discovery, CCCD write, a long read (fragmented
/// at 27 bytes), an indication and its confirmation.
let sessionPDUs: [([UInt8], ATTDirection)] = [
    (hex("02 05 02"), .fromLocal),  // Exchange MTU Request 517
    (hex("03 f7 00"), .toLocal),  // Exchange MTU Response 247
    (hex("10 01 00 ff ff 00 28"), .fromLocal),  // Read By Group Type, primary services
    (hex("11 06 01 00 05 00 10 18"), .toLocal),  // 0x0001–0x0005: Blood Pressure 0x1810
    (hex("12 04 00 02 00"), .fromLocal),  // Write Request CCCD 0x0004 = indicate
    (hex("13"), .toLocal),  // Write Response
    (hex("0b") + (0..<120).map { UInt8($0) }, .toLocal),  // a 121-byte Read Response: 5 ACL fragments
    (hex("1d 03 00 00 78 00 50 00 5d 00"), .toLocal),  // Indication, BPM 120/80/93 mmHg
    (hex("1e"), .fromLocal),  // Confirmation
]

func recordSession(_ datalink: BTSnoopDatalink, handle: UInt16 = 0x0040, start: Int64 = 1_795_330_917_000_000) throws
    -> [HCIRecord]
{
    var rec = SessionRecorder(
        datalink: datalink, adapter: 0, localAddress: BDAddress("00:AA:01:01:00:01")!,
        connectionHandle: handle)
    var t = Timestamp(nanoseconds: start * 1000)
    var out = rec.connected(peer: BDAddress("C0:11:22:33:44:55")!, peerType: .random, role: .central, at: t)
    for (pdu, direction) in sessionPDUs {
        t = t + .milliseconds(30)
        out += try rec.att(pdu, direction: direction, at: t)
    }
    out += rec.disconnected(reason: 0x13, at: t + .milliseconds(500))
    return out
}

@Suite struct WriterTests {
    @Test(arguments: [BTSnoopDatalink.monitor, .uart, .hci])
    func roundTripThroughTheReader(datalink: BTSnoopDatalink) throws {
        let records = try recordSession(datalink)
        var writer = BTSnoopWriter(sink: ArrayByteSink(), datalink: datalink)
        try writer.write(contentsOf: records)
        let bytes = try writer.finish().bytes
        let (back, error) = readAll(bytes)
        #expect(error == nil)
        #expect(back.count == records.count)
        // Identical records apart from the file offsets the reader adds.
        #expect(
            zip(back, records).allSatisfy { a, b in
                var a = a
                a.fileOffset = 0
                return a == b
            })
        let events = try extract(back, strict: true)
        #expect(events.compactMap(\.att).map(\.pdu) == sessionPDUs.map(\.0))
        #expect(events.compactMap(\.att).map(\.direction) == sessionPDUs.map(\.1))
        #expect(events.compactMap(\.att).allSatisfy { $0.connectionKnown && $0.connectionHandle == 0x40 })
        guard case .connected(let c) = events.first, case .disconnected(let d) = events.last else {
            Issue.record("expected connected … disconnected")
            return
        }
        #expect(c.role == .central && c.peerAddress.description == "C0:11:22:33:44:55" && c.peerAddressType == .random)
        #expect(d.reason == 0x13)
    }

    @Test func monitorFileHeaderAndIndexRecords() throws {
        let records = try recordSession(.monitor)
        #expect(records.prefix(3).map(\.kind) == [.monitorNewIndex, .monitorOpenIndex, .monitorIndexInfo])
        // New Index: type 0 (primary), bus 0 (virtual), BD_ADDR (LE), "hci0" padded to 8.
        #expect(records[0].payload == hex("00 00 01 00 01 01 aa 00 68 63 69 30 00 00 00 00"))
        var writer = BTSnoopWriter(sink: ArrayByteSink(), datalink: .monitor)
        try writer.write(records[0])
        let bytes = try writer.finish().bytes
        // "btsnoop\0", version 1, datalink 2001 (0x7d1), then the record: lengths 16, flags 0 (index 0, opcode 0).
        #expect(
            Array(bytes.prefix(32))
                == hex(
                    "62 74 73 6e 6f 6f 70 00 00 00 00 01 00 00 07 d1  00 00 00 10 00 00 00 10 00 00 00 00 00 00 00 00"))
        // H4 cannot carry monitor records.
        var h4 = BTSnoopWriter(sink: ArrayByteSink(), datalink: .uart)
        #expect(throws: CaptureError(.unsupportedRecord)) { try h4.write(records[0]) }
    }

    @Test func largePDUsAreFragmentedAt27BytesLikeAController() throws {
        var rec = SessionRecorder(datalink: .uart, connectionHandle: 0x0040, numberOfCompletedPackets: true)
        let pdu = hex("0b") + [UInt8](repeating: 0xAB, count: 120)  // 121 bytes + 4 L2CAP = 125 = 4×27 + 17
        let rx = try rec.att(pdu, direction: .toLocal, at: .zero)
        #expect(rx.count == 5)
        #expect(rx.map { $0.payload[1] >> 4 } == [0x2, 0x1, 0x1, 0x1, 0x1])  // PB 0b10 then continuations
        #expect(rx.map { Int($0.payload[2]) } == [27, 27, 27, 27, 17])
        #expect(rx[0].payload.prefix(8) == [0x40, 0x20, 27, 0, 121, 0, 4, 0])
        let tx = try rec.att(pdu, direction: .fromLocal, at: .zero)
        // Host→controller: PB 0b00 start, and a Number Of Completed Packets after each packet.
        #expect(
            tx.map(\.kind) == [
                .aclData, .event, .aclData, .event, .aclData, .event, .aclData, .event, .aclData, .event,
            ])
        #expect(tx[0].payload[1] >> 4 == 0)
        #expect(tx[1].payload == hex("13 05 01 40 00 01 00"))
        var quiet = SessionRecorder(datalink: .uart, numberOfCompletedPackets: false)
        #expect(try quiet.att(hex("1e"), direction: .fromLocal, at: .zero).count == 1)
    }

    @Test func fileSinkStreamsToDisk() throws {
        let path = temporaryPath("writer.btsnoop")
        defer { unlink(path) }
        var writer = try BTSnoopWriter(path: path, datalink: .monitor)
        var total = 0
        for i in 0..<300 {  // enough to cross the 64 KiB flush threshold several times
            let records = try recordSession(
                .monitor, handle: UInt16(i % 0xEFF), start: 1_795_330_917_000_000 + Int64(i) * 2_000_000)
            try writer.write(contentsOf: records)
            total += records.count
        }
        _ = try writer.finish()
        var reader = try CaptureReader(path: path)
        var n = 0
        while try reader.next() != nil { n += 1 }
        #expect(n == total)
    }

    /// btmon and tshark must read what we write, decode ATT, and not complain.
    @Test(arguments: [BTSnoopDatalink.monitor, .uart])
    func externalToolsAcceptOurFiles(datalink: BTSnoopDatalink) throws {
        let path = temporaryPath("tools-\(datalink.rawValue).btsnoop")
        defer { unlink(path) }
        var writer = try BTSnoopWriter(path: path, datalink: datalink)
        try writer.write(contentsOf: try recordSession(datalink))
        _ = try writer.finish()

        if let btmon = runTool("/usr/bin/btmon", ["-r", path]) {
            #expect(btmon.status == 0)
            let lines = btmon.output.split(separator: "\n")
            #expect(lines.filter { $0.contains("ATT:") }.count == sessionPDUs.count)
            #expect(btmon.output.contains("LE Enhanced Connection Complete (0x0a)"))
            #expect(btmon.output.contains("Handle Value Indication (0x1d) len 9"))
            #expect(btmon.output.contains("Disconnect Complete (0x05)"))
            #expect(!btmon.output.lowercased().contains("malformed"))
            #expect(!btmon.output.lowercased().contains("invalid"))
            if datalink == .monitor { #expect(btmon.output.contains("New Index: 00:AA:01:01:00:01")) }
        }
        if let tshark = runTool("/usr/bin/tshark", ["-r", path, "-Y", "btatt", "-T", "fields", "-e", "btatt.opcode"]) {
            #expect(tshark.status == 0)
            let opcodes = tshark.output.split(separator: "\n").filter { $0.hasPrefix("0x") }
            #expect(opcodes.map { UInt8($0.dropFirst(2), radix: 16) } == sessionPDUs.map { $0.0[0] })
            #expect(!tshark.output.contains("Malformed"))
            #expect(!tshark.output.contains("damaged"))
        }
        if let time = runTool("/usr/bin/tshark", ["-r", path, "-c", "1", "-T", "fields", "-e", "frame.time_epoch"]) {
            // recordSession starts at Unix 1795330917 s: our btsnoop epoch matches Wireshark's.
            #expect(time.output.contains("1795330917.000000000"))
        }
        if let expert = runTool("/usr/bin/tshark", ["-r", path, "-z", "expert,warn", "-q"]) {
            #expect(expert.status == 0)
            #expect(!expert.output.contains("Malformed"))
        }
    }
}
