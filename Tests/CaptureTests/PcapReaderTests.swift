// SPDX-License-Identifier: GPL-2.0-or-later

import Capture
import CuffCore
import Testing

@Suite struct PcapReaderTests {
    static let aclMTURequest = hex("40 00 07 00  03 00 04 00  02 05 02")

    @Test(arguments: [false, true], [false, true])
    func h4WithPhdr201(bigEndian: Bool, nanoseconds: Bool) throws {
        var b = PcapBuilder(linkType: 201, bigEndian: bigEndian, nanoseconds: nanoseconds)
        // Pseudo-header: BE32 direction (0 sent, 1 received), then the H4 type byte.
        b.record(seconds: 1_700_000_000, fraction: 123, hex("00 00 00 00  01") + hex("03 0c 00"))
        b.record(seconds: 1_700_000_001, fraction: 0, hex("00 00 00 01  02") + Self.aclMTURequest)
        b.record(seconds: 1_700_000_002, fraction: 0, hex("00 00 00 01  04") + hex("0e 04 01 03 0c 00"))
        let (records, error) = readAll(b.bytes)
        #expect(error == nil)
        #expect(records.map(\.kind) == [.command, .aclData, .event])
        #expect(records.map(\.direction) == [.sent, .received, .received])
        #expect(records[1].payload == Self.aclMTURequest)
        #expect(records[0].timestamp.nanoseconds == 1_700_000_000_000_000_000 + (nanoseconds ? 123 : 123_000))
        let offsets: [Int64] = [24, 48, 80]  // 24-byte header; 16-byte record headers + 8 and 16 bytes
        #expect(records.map(\.fileOffset) == offsets)
    }

    @Test(arguments: [false, true])
    func linuxMonitor254(bigEndian: Bool) throws {
        var b = PcapBuilder(linkType: 254, bigEndian: bigEndian)
        // Pseudo-header: BE16 adapter, BE16 opcode — big-endian whatever the file's byte order.
        b.record(seconds: 1, fraction: 0, hex("00 02  00 05") + Self.aclMTURequest)
        b.record(seconds: 2, fraction: 0, hex("00 02  00 02") + hex("03 0c 00"))
        let (records, error) = readAll(b.bytes)
        #expect(error == nil)
        #expect(records.map(\.kind) == [.aclData, .command])
        #expect(records.map(\.direction) == [.received, .sent])
        #expect(records.map(\.adapterIndex) == [2, 2])
        #expect(records[0].payload == Self.aclMTURequest)
        let events = try extract(records)
        #expect(events.compactMap(\.att).map(\.pdu) == [hex("02 05 02")])
    }

    @Test func unknownLinkTypeNamesTheNetworkField() {
        let b = PcapBuilder(linkType: 1, bigEndian: false)  // Ethernet
        let (_, error) = readAll(b.bytes)
        #expect(error == CaptureError(.unknownDatalink))
        #expect(error?.offset == 20)
    }

    @Test func shortPseudoHeaderIsRecoverable() throws {
        var b = PcapBuilder(linkType: 201, bigEndian: true)
        b.record(seconds: 0, fraction: 0, hex("00 00"))
        b.record(seconds: 0, fraction: 0, hex("00 00 00 00 01 03 0c 00"))
        var reader = CaptureReader(source: ArrayByteSource(b.bytes))
        #expect(throws: CaptureError(.malformedPacket)) { try reader.next() }
        #expect(try reader.next()?.kind == .command)
    }
}

@Suite struct PcapngReaderTests {
    static let aclMTURequest = hex("40 00 07 00  03 00 04 00  02 05 02")

    @Test(arguments: [false, true])
    func interfacesPacketsAndUnknownBlocks(bigEndian: Bool) throws {
        var b = PcapngBuilder(bigEndian: bigEndian)
        b.interface(linkType: 201, tsresol: 9)  // interface 0: H4, nanosecond ticks
        b.interface(linkType: 254)  // interface 1: monitor, default µs ticks
        b.block(0x0000_0BAD, [1, 2, 3, 4, 5, 6, 7, 8])  // unknown block: skipped
        b.enhancedPacket(interface: 0, ticks: 1_500_000_000_123_456_789, hex("00 00 00 00 02") + Self.aclMTURequest)
        b.enhancedPacket(interface: 1, ticks: 1_500_000_000_123_456, hex("00 07 00 05") + Self.aclMTURequest)
        b.simplePacket(hex("00 00 00 01 04 0e 04 01 03 0c 00"))  // SPB: interface 0
        let (records, error) = readAll(b.bytes)
        #expect(error == nil)
        #expect(records.map(\.kind) == [.aclData, .aclData, .event])
        #expect(records.map(\.direction) == [.sent, .received, .received])
        #expect(records.map(\.adapterIndex) == [0, 7, 0])
        #expect(records[0].timestamp.nanoseconds == 1_500_000_000_123_456_789)
        #expect(records[1].timestamp.nanoseconds == 1_500_000_000_123_456_000)
        #expect(records[0].payload == Self.aclMTURequest)
        #expect(records[2].payload == hex("0e 04 01 03 0c 00"))
        // SHB 28 bytes, IDB 32 (with tsresol), IDB 20, unknown 20, then the EPB.
        #expect(records[0].fileOffset == 28 + 32 + 20 + 20)
    }

    /// Probe C3: a capture in obsolete Packet Blocks (type 2, which Wireshark still reads) was
    /// skipped whole as unknown blocks, with nothing said (exit 2, no measurement). Read as the
    /// EPB it prefigures; a packet before any interface says so.
    @Test(arguments: [false, true])
    func obsoletePacketBlocksAreRead(bigEndian: Bool) throws {
        var b = PcapngBuilder(bigEndian: bigEndian)
        b.interface(linkType: 254)
        b.interface(linkType: 201, tsresol: 9)
        b.obsoletePacket(interface: 0, ticks: 1_500_000_000_123_456, hex("00 07 00 05") + Self.aclMTURequest)
        b.obsoletePacket(interface: 1, ticks: 1_500_000_000_123_456_789, hex("00 00 00 00 02") + Self.aclMTURequest)
        let (records, error) = readAll(b.bytes)
        #expect(error == nil)
        #expect(records.map(\.kind) == [.aclData, .aclData])
        #expect(records.map(\.adapterIndex) == [7, 1])  // (monitor: its index; H4: the interface)
        #expect(records.map(\.timestamp.nanoseconds) == [1_500_000_000_123_456_000, 1_500_000_000_123_456_789])
        #expect(records.allSatisfy { $0.payload == Self.aclMTURequest })
        // Its block cut short of its captured length: said, and the reader goes on.
        var short = PcapngBuilder(bigEndian: bigEndian)
        short.interface(linkType: 254)
        var body = ByteWriter()
        PcapngBuilder.u16(&body, bigEndian, 0); PcapngBuilder.u16(&body, bigEndian, 0)
        for v: UInt32 in [0, 0, 200, 200] { PcapngBuilder.u32(&body, bigEndian, v) }
        short.block(2, body.bytes)
        #expect(readAll(short.bytes).error == CaptureError(.badBlockLength))
        var orphan = PcapngBuilder(bigEndian: bigEndian)
        orphan.obsoletePacket(interface: 0, ticks: 0, Self.aclMTURequest)
        let e = readAll(orphan.bytes).error
        #expect(e == CaptureError(.unknownInterface))
        #expect(e?.message.contains("expected an Interface Description Block before the first packet") == true)
    }

    @Test func aNewSectionForgetsInterfaces() {
        var b = PcapngBuilder(bigEndian: false)
        b.interface(linkType: 201)
        let second = PcapngBuilder(bigEndian: true)  // a big-endian section appended
        var bytes = b.bytes + second.bytes
        var tail = PcapngBuilder(bigEndian: true)
        tail.w.bytes = []
        tail.enhancedPacket(interface: 0, ticks: 0, hex("00 00 00 00 01 03 0c 00"))
        bytes += tail.bytes
        let (records, error) = readAll(bytes)
        #expect(records.isEmpty)
        #expect(error == CaptureError(.unknownInterface))
        #expect(error?.isRecoverable == true)
    }

    @Test func unsupportedInterfaceIsReportedOnceAndItsPacketsSkipped() throws {
        var b = PcapngBuilder(bigEndian: false)
        b.interface(linkType: 1)  // Ethernet
        b.interface(linkType: 201)
        b.enhancedPacket(interface: 0, ticks: 0, [0xFF, 0xFF])
        b.enhancedPacket(interface: 1, ticks: 0, hex("00 00 00 00 01 03 0c 00"))
        var reader = CaptureReader(source: ArrayByteSource(b.bytes))
        do {
            _ = try reader.next()
            Issue.record("expected unknown_datalink")
        } catch {
            #expect(error.code == .unknownDatalink)
            #expect(error.offset == 28)
        }
        #expect(try reader.next()?.kind == .command)
        #expect(try reader.next() == nil)
    }

    /// A packet on a skipped interface is as long as its link allows (an Ethernet jumbo frame, a
    /// USB transfer): skipped unread, and the Bluetooth packets after it still come out (probe Q:
    /// `oversize_record`, and the replay ended there). On a Bluetooth interface it is still damage.
    @Test func aLongPacketOnASkippedInterfaceIsSkipped() throws {
        for bigEndian in [false, true] {
            var b = PcapngBuilder(bigEndian: bigEndian)
            b.interface(linkType: 1)  // Ethernet
            b.interface(linkType: 201)
            b.enhancedPacket(interface: 0, ticks: 0, [UInt8](repeating: 0xAB, count: 140_000))
            b.enhancedPacket(interface: 1, ticks: 0, hex("00 00 00 00 01 03 0c 00"))
            // Read on past the recoverable error (the Ethernet interface, said once).
            var reader = CaptureReader(source: ArrayByteSource(b.bytes))
            var kinds: [HCIPacketKind] = []
            var errors: [CaptureError.Code] = []
            while true {
                do {
                    guard let r = try reader.next() else { break }
                    kinds.append(r.kind)
                } catch {
                    errors.append(error.code)
                    if !error.isRecoverable { break }
                }
            }
            #expect(kinds == [.command], "big endian: \(bigEndian)")
            #expect(errors == [.unknownDatalink], "big endian: \(bigEndian)")
            var bt = PcapngBuilder(bigEndian: bigEndian)
            bt.interface(linkType: 201)
            bt.enhancedPacket(interface: 0, ticks: 0, [UInt8](repeating: 0, count: 140_000))
            #expect(readAll(bt.bytes).error == CaptureError(.oversizeRecord))
        }
    }

    @Test func blockLengthsAreValidated() {
        var b = PcapngBuilder(bigEndian: false)
        b.interface(linkType: 201)
        let good = b.bytes
        // Length not a multiple of 4.
        var odd = good
        odd += hex("06 00 00 00  0d 00 00 00") + [UInt8](repeating: 0, count: 5)
        var r = readAll(odd)
        #expect(r.error == CaptureError(.badBlockLength))
        #expect(r.error?.offset == Int64(good.count) + 4)
        // Trailer differs from header.
        var mismatch = good
        mismatch += hex("06 00 00 00  10 00 00 00  00 00 00 00  14 00 00 00")
        r = readAll(mismatch)
        #expect(r.error == CaptureError(.badBlockLength))
        #expect(r.error?.offset == Int64(good.count) + 12)
        // Too small.
        r = readAll(good + hex("06 00 00 00  08 00 00 00"))
        #expect(r.error == CaptureError(.badBlockLength))
        // Byte-order magic wrong.
        var badBOM = good
        badBOM[8] = 0x00
        r = readAll(badBOM)
        #expect(r.error == CaptureError(.badMagic))
        #expect(r.error?.offset == 8)
    }
}
