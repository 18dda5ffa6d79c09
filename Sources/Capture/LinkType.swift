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
        let record = data.withUnsafeBytes { raw in
            view(
                linkType: linkType, data: raw, originalLength: originalLength, timestamp: timestamp,
                interface: interface, fileOffset: fileOffset
            ).map { HCIRecord($0) }
        }
        if let record { return record }
        switch linkType {
        case bluetoothH4WithPHDR:
            throw CaptureError(
                .malformedPacket,
                "expected a 4-byte direction pseudo-header and an H4 type byte, found \(data.count) bytes",
                offset: fileOffset, isRecoverable: true)
        case bluetoothLinuxMonitor:
            throw CaptureError(
                .malformedPacket, "expected a 4-byte adapter/opcode pseudo-header, found \(data.count) bytes",
                offset: fileOffset, isRecoverable: true)
        case bluetoothLELLWithPHDR:
            throw CaptureError(
                .malformedPacket,
                "expected a 10-byte pseudo-header, access address and PDU header, found \(data.count) bytes",
                offset: fileOffset, isRecoverable: true)
        default:
            throw CaptureError(
                .unknownDatalink, "link type \(linkType) is not a Bluetooth link type this reader decodes",
                offset: fileOffset)
        }
    }

    /// What ``decode(linkType:data:originalLength:timestamp:interface:fileOffset:)`` makes of one
    /// packet, with the payload borrowed from `data` (the readers' short path: no copy); nil where
    /// it throws (a pseudo-header cut short, a link type it does not decode).
    @inline(__always)
    static func view(
        linkType: UInt32, data: UnsafeRawBufferPointer, originalLength: Int, timestamp: Timestamp,
        interface: UInt16, fileOffset: Int64
    ) -> RecordView? {
        switch linkType {
        case bluetoothH4WithPHDR:
            // BE32 direction (only its low bit counts), then the H4 type byte.
            guard data.count >= 5 else { return nil }
            return RecordView(
                timestamp: timestamp, adapterIndex: interface, direction: data[3] & 1 == 0 ? .sent : .received,
                kind: .fromH4(type: data[4]), originalLength: max(0, originalLength - 5), fileOffset: fileOffset,
                payload: UnsafeRawBufferPointer(rebasing: data[5...]))
        case bluetoothLinuxMonitor:
            guard data.count >= 4 else { return nil }
            let adapter = UInt16(data[0]) << 8 | UInt16(data[1])
            let (kind, direction) = HCIPacketKind.fromMonitor(opcode: UInt16(data[2]) << 8 | UInt16(data[3]))
            return RecordView(
                timestamp: timestamp, adapterIndex: adapter, direction: direction, kind: kind,
                originalLength: max(0, originalLength - 4), fileOffset: fileOffset,
                payload: UnsafeRawBufferPointer(rebasing: data[4...]))
        case bluetoothLELLWithPHDR:
            guard data.count >= LinkLayer.pseudoHeaderLength + 4 + 2 else { return nil }
            return RecordView(
                timestamp: timestamp, adapterIndex: interface, direction: .received, kind: .linkLayer,
                originalLength: originalLength, fileOffset: fileOffset, payload: data)
        default:
            return nil
        }
    }
}
