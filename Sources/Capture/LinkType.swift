// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// The pcap/pcapng link types this package decodes (tcpdump.org link-layer header types).
public enum LinkType {
    /// LINKTYPE_BLUETOOTH_HCI_H4_WITH_PHDR: BE32 direction (0 sent, 1 received), then H4.
    public static let bluetoothH4WithPHDR: UInt32 = 201
    /// LINKTYPE_BLUETOOTH_LINUX_MONITOR: BE16 adapter, BE16 monitor opcode, then the packet.
    public static let bluetoothLinuxMonitor: UInt32 = 254
    /// LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR: 10-byte LE pseudo-header, then access address + LL PDU + CRC.
    public static let bluetoothLELLWithPHDR: UInt32 = 256

    public static let supported: Set<UInt32> = [bluetoothH4WithPHDR, bluetoothLinuxMonitor, bluetoothLELLWithPHDR]

    /// Turns one captured packet of link type `linkType` into an ``HCIRecord``.
    ///
    /// - Throws: `malformed_packet` (recoverable) when the pseudo-header is cut short.
    static func decode(
        linkType: UInt32, data: ArraySlice<UInt8>, originalLength: Int, timestamp: Timestamp,
        interface: UInt16, fileOffset: Int64
    ) throws(CaptureError) -> HCIRecord {
        var r = ByteReader(data)
        switch linkType {
        case bluetoothH4WithPHDR:
            guard let dir = r.readUInt32BigEndian(), let type = r.readUInt8() else {
                throw CaptureError(
                    .malformedPacket,
                    "expected a 4-byte direction pseudo-header and an H4 type byte, found \(data.count) bytes",
                    offset: fileOffset, isRecoverable: true)
            }
            return HCIRecord(
                timestamp: timestamp, adapterIndex: interface, direction: dir & 1 == 0 ? .sent : .received,
                kind: .fromH4(type: type), payload: Array(r.readRemaining()),
                originalLength: max(0, originalLength - 5), fileOffset: fileOffset)
        case bluetoothLinuxMonitor:
            guard let adapter = r.readUInt16BigEndian(), let opcode = r.readUInt16BigEndian() else {
                throw CaptureError(
                    .malformedPacket, "expected a 4-byte adapter/opcode pseudo-header, found \(data.count) bytes",
                    offset: fileOffset, isRecoverable: true)
            }
            let (kind, direction) = HCIPacketKind.fromMonitor(opcode: opcode)
            return HCIRecord(
                timestamp: timestamp, adapterIndex: adapter, direction: direction, kind: kind,
                payload: Array(r.readRemaining()), originalLength: max(0, originalLength - 4),
                fileOffset: fileOffset)
        case bluetoothLELLWithPHDR:
            guard data.count >= LinkLayer.pseudoHeaderLength + 4 + 2 else {
                throw CaptureError(
                    .malformedPacket,
                    "expected a 10-byte pseudo-header, access address and PDU header, found \(data.count) bytes",
                    offset: fileOffset, isRecoverable: true)
            }
            return HCIRecord(
                timestamp: timestamp, adapterIndex: interface, direction: .received, kind: .linkLayer,
                payload: Array(data), originalLength: originalLength, fileOffset: fileOffset)
        default:
            throw CaptureError(
                .unknownDatalink, "link type \(linkType) is not a Bluetooth link type this reader decodes",
                offset: fileOffset)
        }
    }
}
