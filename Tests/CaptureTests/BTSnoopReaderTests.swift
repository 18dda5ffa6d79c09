// SPDX-License-Identifier: GPL-2.0-or-later

import Capture
import CuffCore
import Testing

@Suite struct BTSnoopReaderTests {
    // HCI Reset command, Command Complete for it, an ACL ATT Exchange MTU Request, and its RX twin.
    static let reset = hex("03 0c 00")
    static let resetComplete = hex("0e 04 01 03 0c 00")
    static let aclMTURequest = hex("40 00 07 00  03 00 04 00  02 05 02")

    @Test func h1Datalink1001() throws {
        var b = BTSnoopBuilder(datalink: 1001)
        b.record(flags: 2, unixMicros: 1_000_000, Self.reset)  // command: bit1 set, bit0 clear
        b.record(flags: 3, unixMicros: 1_000_250, Self.resetComplete)  // event: received
        b.record(flags: 0, unixMicros: 1_000_500, Self.aclMTURequest)  // ACL sent
        b.record(flags: 1, unixMicros: 1_000_750, Self.aclMTURequest)  // ACL received
        let (records, error) = readAll(b.bytes)
        #expect(error == nil)
        #expect(records.map(\.kind) == [.command, .event, .aclData, .aclData])
        #expect(records.map(\.direction) == [.sent, .received, .sent, .received])
        #expect(records[0].payload == Self.reset)
        #expect(records[1].payload == Self.resetComplete)
        #expect(records[2].payload == Self.aclMTURequest)
        let offsets: [Int64] = [16, 43, 73, 108]  // 16-byte header, then 24-byte record headers + 3, 6, 11 bytes
        #expect(records.map(\.fileOffset) == offsets)
        #expect(records[0].timestamp.nanoseconds == 1_000_000_000)
        #expect(records[3].timestamp.nanoseconds == 1_000_750_000)
        #expect(records.allSatisfy { $0.adapterIndex == 0 })
    }

    @Test func h4Datalink1002() throws {
        var b = BTSnoopBuilder(datalink: 1002)
        b.record(flags: 2, unixMicros: 5, [0x01] + Self.reset)
        b.record(flags: 3, unixMicros: 6, [0x04] + Self.resetComplete)
        b.record(flags: 0, unixMicros: 7, [0x02] + Self.aclMTURequest)
        b.record(flags: 1, unixMicros: 8, [0x05, 0xAA])  // ISO, received
        b.record(flags: 1, unixMicros: 9, [0x03, 0xBB])  // SCO
        b.record(flags: 1, unixMicros: 10, [0x09, 0xCC])  // unknown H4 type
        let (records, error) = readAll(b.bytes)
        #expect(error == nil)
        #expect(records.map(\.kind) == [.command, .event, .aclData, .isoData, .scoData, .other(9)])
        #expect(records.map(\.direction) == [.sent, .received, .sent, .received, .received, .received])
        #expect(records[0].payload == Self.reset)
        #expect(records[2].payload == Self.aclMTURequest)
        #expect(records[3].payload == [0xAA])
    }

    @Test func h4EmptyRecordIsRecoverable() throws {
        var b = BTSnoopBuilder(datalink: 1002)
        b.record(flags: 0, unixMicros: 0, [])
        b.record(flags: 2, unixMicros: 0, [0x01] + Self.reset)
        var reader = CaptureReader(source: ArrayByteSource(b.bytes))
        #expect(throws: CaptureError(.malformedPacket)) { try reader.next() }
        #expect(try reader.next()?.kind == .command)
        #expect(try reader.next() == nil)
    }

    @Test func monitorDatalink2001() throws {
        var b = BTSnoopBuilder(datalink: 2001)
        // New Index hci3: type 0, bus 0 (virtual), address 00:AA:01:00:00:00, name "hci3".
        let newIndex = hex("00 00  00 00 00 01 aa 00") + Array("hci3".utf8) + [0, 0, 0, 0]
        b.record(flags: 3 << 16 | 0, unixMicros: 1, newIndex)
        b.record(flags: 3 << 16 | 2, unixMicros: 2, Self.reset)
        b.record(flags: 3 << 16 | 3, unixMicros: 3, Self.resetComplete)
        b.record(flags: 3 << 16 | 4, unixMicros: 4, Self.aclMTURequest)
        b.record(flags: 3 << 16 | 5, unixMicros: 5, Self.aclMTURequest)
        b.record(flags: 3 << 16 | 18, unixMicros: 6, [1])  // ISO TX
        b.record(flags: 3 << 16 | 19, unixMicros: 7, [2])  // ISO RX
        b.record(flags: 0xFFFF << 16 | 12, unixMicros: 8, Array("note".utf8) + [0])  // System Note, no index
        b.record(flags: 3 << 16 | 1, unixMicros: 9, [])  // Deleted Index
        b.record(flags: 0xFFFF << 16 | 14, unixMicros: 10, [0, 0])  // Control Open: kept as .other
        let (records, error) = readAll(b.bytes)
        #expect(error == nil)
        #expect(
            records.map(\.kind) == [
                .monitorNewIndex, .command, .event, .aclData, .aclData, .isoData, .isoData,
                .monitorNote, .monitorDeleteIndex, .other(14),
            ])
        #expect(
            records.map(\.direction) == [
                .received, .sent, .received, .sent, .received, .sent, .received,
                .received, .received, .received,
            ])
        #expect(records.map(\.adapterIndex) == [3, 3, 3, 3, 3, 3, 3, 0xFFFF, 3, 0xFFFF])
        #expect(records[0].payload == newIndex)
    }

    @Test func dripFedOneByteAtATimeGivesTheSameRecords() throws {
        var b = BTSnoopBuilder(datalink: 2001)
        for i in 0..<20 {
            b.record(flags: UInt32(2 + i % 4), unixMicros: Int64(i), [UInt8](repeating: UInt8(i), count: i * 7))
        }
        let whole = readAll(b.bytes)
        var reader = CaptureReader(source: ArrayByteSource(b.bytes), chunkSize: 1)
        let drip = try reader.readAll()
        #expect(whole.error == nil)
        #expect(drip == whole.records)
        #expect(drip.count == 20)
    }

    @Test func forcedFormatMustMatchMagic() {
        var b = BTSnoopBuilder(datalink: 2001)
        b.record(flags: 2, unixMicros: 0, Self.reset)
        #expect(readAll(b.bytes, format: .btsnoop).records.count == 1)
        let asPcap = readAll(b.bytes, format: .pcap)
        #expect(asPcap.error == CaptureError(.badMagic))
        #expect(asPcap.error?.offset == 0)
        #expect(readAll(b.bytes, format: .pcapng).error == CaptureError(.badMagic))
    }

    @Test func timestampConversionRoundTrips() {
        let t = Timestamp(nanoseconds: 1_795_330_917_473_639_000)
        #expect(BTSnoop.btsnoopTimestamp(t) == 0x00E3_3E8B_1CC6_9D67)  // first record of the shared sample
        #expect(BTSnoop.timestamp(fromBTSnoop: 0x00E3_3E8B_1CC6_9D67) == t)
        #expect(BTSnoop.timestamp(fromBTSnoop: .max).nanoseconds == .max)  // saturates, no trap
    }
}
