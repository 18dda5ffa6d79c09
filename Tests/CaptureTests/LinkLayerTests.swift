// SPDX-License-Identifier: GPL-2.0-or-later

import Capture
import CuffCore
import CuffTestSupport
import Foundation
import Testing

/// Hand-built LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR (256) packets, nRF-Sniffer style.
enum LL {
    static let connectionAA: UInt32 = 0x5065_A3B1

    /// Pseudo-header + access address + PDU header + payload + CRC (zeros: flags say "CRC checked, valid").
    static func packet(
        channel: UInt8, aa: UInt32, pduType: UInt16, header0: UInt8, _ payload: [UInt8], crcValid: Bool = true
    ) -> [UInt8] {
        var w = ByteWriter()
        w.write(channel)
        w.write(UInt8(0xC4))  // signal -60 dBm
        w.write(UInt8(0x9C))  // noise -100 dBm
        w.write(UInt8(0))  // access address offenses
        w.write(aa)  // reference access address
        // dewhitened | signal valid | noise valid | ref AA valid | CRC checked | (CRC valid) | PDU type
        w.write(UInt16(0x0001 | 0x0002 | 0x0004 | 0x0010 | 0x0400) | (crcValid ? 0x0800 : 0) | pduType << 7)
        w.write(aa)
        w.write(header0)
        w.write(UInt8(payload.count))
        w.write(contentsOf: payload)
        w.write(contentsOf: [0, 0, 0] as [UInt8])
        return w.bytes
    }

    /// CONNECT_IND from initiator 11:22:33:44:55:66 (public) to advertiser C0:11:22:33:44:55 (random).
    static var connectInd: [UInt8] {
        var p = ByteWriter()
        p.write(contentsOf: BDAddress("11:22:33:44:55:66")!.bytes)  // InitA
        p.write(contentsOf: BDAddress("C0:11:22:33:44:55")!.bytes)  // AdvA
        p.write(connectionAA)
        p.writeUInt24(0x55_5555)  // CRCInit
        p.write(UInt8(2)); p.write(UInt16(5)); p.write(UInt16(24)); p.write(UInt16(0)); p.write(UInt16(72))
        p.write(contentsOf: [0xFF, 0xFF, 0xFF, 0xFF, 0x1F] as [UInt8])  // channel map
        p.write(UInt8(0x2F))  // hop 15, SCA 1
        // PDU type 5, ChSel 0, TxAdd 0 (InitA public), RxAdd 1 (AdvA random).
        return packet(channel: 37, aa: LinkLayer.advertisingAccessAddress, pduType: 0, header0: 0x05 | 0x80, p.bytes)
    }

    /// A data PDU: LLID, SN, NESN; `toPeripheral` picks the pseudo-header PDU type 2 or 3.
    static func data(llid: UInt8, sn: UInt8, nesn: UInt8, toPeripheral: Bool, _ payload: [UInt8], crcValid: Bool = true)
        -> [UInt8]
    {
        packet(
            channel: 10, aa: connectionAA, pduType: toPeripheral ? 2 : 3,
            header0: llid | nesn << 2 | sn << 3, payload, crcValid: crcValid)
    }
}

@Suite struct LinkLayerTests {
    static let writeRequest: [UInt8] = [0x12, 0x10, 0x00] + (0..<27).map { UInt8($0) }  // 30 bytes: 2 LL PDUs

    static func capture() -> [UInt8] {
        let frame: [UInt8] = [30, 0, 4, 0] + writeRequest
        var b = PcapBuilder(linkType: 256, bigEndian: false)
        var t: UInt32 = 0
        func add(_ p: [UInt8]) { b.record(seconds: 1_700_000_000, fraction: t, p); t += 1000 }
        add(LL.connectInd)
        add(LL.data(llid: 1, sn: 0, nesn: 0, toPeripheral: true, []))  // empty PDU
        add(LL.data(llid: 1, sn: 0, nesn: 1, toPeripheral: false, []))
        add(LL.data(llid: 2, sn: 1, nesn: 1, toPeripheral: true, hex("03 00 04 00 02 05 02")))  // MTU request
        add(LL.data(llid: 2, sn: 1, nesn: 1, toPeripheral: true, hex("03 00 04 00 02 05 02")))  // retransmission
        add(LL.data(llid: 2, sn: 1, nesn: 0, toPeripheral: false, hex("03 00 04 00 03 f7 00")))  // MTU response
        add(LL.data(llid: 2, sn: 0, nesn: 0, toPeripheral: true, Array(frame[0..<27])))
        add(LL.data(llid: 1, sn: 1, nesn: 1, toPeripheral: true, Array(frame[27...])))
        // CRC bad: dropped
        add(LL.data(llid: 2, sn: 0, nesn: 0, toPeripheral: false, hex("01 00 04 00 13"), crcValid: false))
        add(LL.data(llid: 2, sn: 1, nesn: 0, toPeripheral: false, hex("01 00 04 00 13")))  // Write Response
        // SMP: ignored
        add(LL.data(llid: 2, sn: 0, nesn: 0, toPeripheral: true, hex("07 00 06 00 01 03 00 00 10 00 00")))
        add(LL.data(llid: 3, sn: 1, nesn: 0, toPeripheral: true, hex("02 13")))  // LL_TERMINATE_IND
        return b.bytes
    }

    @Test func sniffedConnectionYieldsATT() throws {
        let (records, error) = readAll(Self.capture())
        #expect(error == nil)
        #expect(records.allSatisfy { $0.kind == .linkLayer })
        let events = try extract(records, strict: true)
        guard case .connected(let c) = events.first else { Issue.record("expected connected"); return }
        #expect(c.accessAddress == LL.connectionAA)
        #expect(c.peerAddress.description == "C0:11:22:33:44:55" && c.peerAddressType == .random)
        let att = events.compactMap(\.att)
        #expect(att.map(\.pdu) == [hex("02 05 02"), hex("03 f7 00"), Self.writeRequest, hex("13")])
        #expect(
            att.map(\.direction) == [
                .centralToPeripheral, .peripheralToCentral, .centralToPeripheral, .peripheralToCentral,
            ])
        #expect(
            att.allSatisfy {
                $0.connectionKnown && $0.accessAddress == LL.connectionAA && $0.connectionHandle == c.connectionHandle
            })
        guard case .disconnected(let d) = events.last else { Issue.record("expected disconnected"); return }
        #expect(d.reason == 0x13)
    }

    /// A resend repeats the SN of the side's previous packet, empty ones included: the same
    /// notification sent again after an empty packet (the SN moved on twice) is a new one (was:
    /// compared with the last non-empty packet only, and dropped as a resend after an odd number
    /// of empty packets: repeated cuff pressures went missing from nRF Sniffer captures).
    @Test func theSameBytesAfterAnEmptyPacketAreNoResend() throws {
        let notification = hex("04 00 04 00 1b 09 00 64")
        for empties in 0...3 {
            var b = PcapBuilder(linkType: 256, bigEndian: false)
            var t: UInt32 = 0
            func add(_ p: [UInt8]) { b.record(seconds: 1_700_000_000, fraction: t, p); t += 1000 }
            add(LL.connectInd)
            var central: UInt8 = 0, peripheral: UInt8 = 0
            // One connection event: the central's packet, then the peripheral's, each acknowledging the other's.
            func event(_ payload: [UInt8]) {
                add(LL.data(llid: 1, sn: central, nesn: peripheral, toPeripheral: true, []))
                central ^= 1
                add(LL.data(llid: payload.isEmpty ? 1 : 2, sn: peripheral, nesn: central, toPeripheral: false, payload))
                peripheral ^= 1
            }
            event(notification)
            for _ in 0..<empties { event([]) }
            event(notification)
            let (records, error) = readAll(b.bytes)
            #expect(error == nil)
            let att = try extract(records, strict: true).compactMap(\.att)
            #expect(att.map(\.pdu) == [hex("1b 09 00 64"), hex("1b 09 00 64")], "\(empties) empty packets between")
        }
    }

    @Test func encryptedLinksAreSkipped() throws {
        var b = PcapBuilder(linkType: 256, bigEndian: true)
        b.record(seconds: 0, fraction: 0, LL.data(llid: 2, sn: 0, nesn: 0, toPeripheral: true, hex("01 00 04 00 1e")))
        b.record(
            seconds: 0, fraction: 1,
            // LL_ENC_REQ
            LL.data(llid: 3, sn: 1, nesn: 0, toPeripheral: true, hex("03") + [UInt8](repeating: 0, count: 22)))
        b.record(seconds: 0, fraction: 2, LL.data(llid: 2, sn: 0, nesn: 0, toPeripheral: false, hex("01 00 04 00 1e")))
        let att = try extract(readAll(b.bytes).records).compactMap(\.att)
        #expect(att.count == 1)
        #expect(att.first?.connectionKnown == false)  // no CONNECT_IND seen
    }

    @Test func truncatedLinkLayerPacketWarns() throws {
        var bytes = LL.data(llid: 2, sn: 0, nesn: 0, toPeripheral: true, hex("01 00 04 00 1e"))
        bytes.removeLast(6)  // cut into the payload the header announces
        let record = HCIRecord(timestamp: .zero, direction: .received, kind: .linkLayer, payload: bytes)
        #expect(try extract([record]) == [.warning(CaptureError(.malformedPacket))])
    }

    /// Wireshark must read our hand-built 256 file as the same ATT exchange (checks the vectors, not just our reader).
    @Test func tsharkAgreesOnTheHandBuiltVectors() throws {
        let path = temporaryPath("ll.pcap")
        defer { unlink(path) }
        _ = FileManager.default.createFile(atPath: path, contents: Data(Self.capture()))
        guard let r = runTool("/usr/bin/tshark", ["-r", path, "-Y", "btatt", "-T", "fields", "-e", "btatt.opcode"])
        else { return }
        #expect(r.status == 0)
        let opcodes = r.output.split(separator: "\n").filter { $0.hasPrefix("0x") }
        // tshark lists the retransmitted MTU request and the bad-CRC Write Response too; we drop both.
        #expect(opcodes == ["0x02", "0x02", "0x03", "0x12", "0x13", "0x13"])
    }
}
