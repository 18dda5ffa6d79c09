// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// Which way a packet crossed the host–controller interface.
public enum HCIDirection: Sendable, Hashable {
    /// Host → controller (commands, ACL TX).
    case sent
    /// Controller → host (events, ACL RX), and everything a sniffer or the monitor itself reports.
    case received
}

/// What an ``HCIRecord``'s payload is.
public enum HCIPacketKind: Sendable, Hashable {
    /// HCI command: opcode (2), parameter length (1), parameters.
    case command
    /// HCI event: event code (1), parameter length (1), parameters.
    case event
    /// HCI ACL data: handle + flags (2), data length (2), data.
    case aclData
    /// HCI synchronous (SCO) data.
    case scoData
    /// HCI isochronous data.
    case isoData
    /// Linux monitor New Index (opcode 0): type, bus, BD_ADDR, name.
    case monitorNewIndex
    /// Linux monitor Deleted Index (opcode 1).
    case monitorDeleteIndex
    /// Linux monitor Open Index (opcode 8).
    case monitorOpenIndex
    /// Linux monitor Close Index (opcode 9).
    case monitorCloseIndex
    /// Linux monitor Index Info (opcode 10): BD_ADDR, manufacturer.
    case monitorIndexInfo
    /// Linux monitor System Note (opcode 12): text.
    case monitorNote
    /// Linux monitor User Logging (opcode 13): priority, ident, text.
    case monitorUserLogging
    /// A Bluetooth LE link-layer packet from a sniffer (LINKTYPE 256): the 10-byte little-endian
    /// pseudo-header, then access address, PDU header, PDU and CRC.
    case linkLayer
    /// Anything else: the Linux monitor opcode, or the H4 packet-type byte this reader doesn't model.
    case other(UInt16)

    /// Linux monitor opcodes (BlueZ `src/shared/btsnoop.h`).
    public enum MonitorOpcode {
        public static let newIndex: UInt16 = 0, deleteIndex: UInt16 = 1
        public static let command: UInt16 = 2, event: UInt16 = 3
        public static let aclTX: UInt16 = 4, aclRX: UInt16 = 5
        public static let scoTX: UInt16 = 6, scoRX: UInt16 = 7
        public static let openIndex: UInt16 = 8, closeIndex: UInt16 = 9, indexInfo: UInt16 = 10
        public static let vendorDiag: UInt16 = 11, systemNote: UInt16 = 12, userLogging: UInt16 = 13
        public static let isoTX: UInt16 = 18, isoRX: UInt16 = 19
    }

    /// Decodes a Linux monitor opcode into kind and direction.
    @inline(__always) public static func fromMonitor(opcode: UInt16) -> (HCIPacketKind, HCIDirection) {
        // The values of ``MonitorOpcode`` as literals: a switch over literals is one jump (every
        // record of a btmon file comes through here), one over the named constants a chain of
        // comparisons.
        switch opcode {
        case 0: return (.monitorNewIndex, .received)
        case 1: return (.monitorDeleteIndex, .received)
        case 2: return (.command, .sent)
        case 3: return (.event, .received)
        case 4: return (.aclData, .sent)
        case 5: return (.aclData, .received)
        case 6: return (.scoData, .sent)
        case 7: return (.scoData, .received)
        case 8: return (.monitorOpenIndex, .received)
        case 9: return (.monitorCloseIndex, .received)
        case 10: return (.monitorIndexInfo, .received)
        case 12: return (.monitorNote, .received)
        case 13: return (.monitorUserLogging, .received)
        case 18: return (.isoData, .sent)
        case 19: return (.isoData, .received)
        default: return (.other(opcode), .received)
        }
    }

    /// The Linux monitor opcode for this kind and direction, or nil for ``linkLayer``.
    public func monitorOpcode(direction: HCIDirection) -> UInt16? {
        typealias M = MonitorOpcode
        switch self {
        case .command: return M.command
        case .event: return M.event
        case .aclData: return direction == .sent ? M.aclTX : M.aclRX
        case .scoData: return direction == .sent ? M.scoTX : M.scoRX
        case .isoData: return direction == .sent ? M.isoTX : M.isoRX
        case .monitorNewIndex: return M.newIndex
        case .monitorDeleteIndex: return M.deleteIndex
        case .monitorOpenIndex: return M.openIndex
        case .monitorCloseIndex: return M.closeIndex
        case .monitorIndexInfo: return M.indexInfo
        case .monitorNote: return M.systemNote
        case .monitorUserLogging: return M.userLogging
        case .linkLayer: return nil
        case .other(let op): return op
        }
    }

    /// H4 (UART) packet-type bytes.
    public enum H4Type {
        public static let command: UInt8 = 0x01, acl: UInt8 = 0x02, sco: UInt8 = 0x03
        public static let event: UInt8 = 0x04, iso: UInt8 = 0x05
    }

    /// Decodes an H4 packet-type byte.
    public static func fromH4(type: UInt8) -> HCIPacketKind {
        switch type {
        case H4Type.command: return .command
        case H4Type.acl: return .aclData
        case H4Type.sco: return .scoData
        case H4Type.event: return .event
        case H4Type.iso: return .isoData
        default: return .other(UInt16(type))
        }
    }

    /// The H4 packet-type byte for this kind, or nil if H4 cannot carry it.
    public var h4Type: UInt8? {
        switch self {
        case .command: return H4Type.command
        case .aclData: return H4Type.acl
        case .scoData: return H4Type.sco
        case .event: return H4Type.event
        case .isoData: return H4Type.iso
        default: return nil
        }
    }
}

/// One packet from a capture, as the host–controller interface saw it.
public struct HCIRecord: Sendable, Hashable {
    /// Largest payload a reader accepts (65 KiB: any HCI packet plus headroom). Bigger records are
    /// rejected as `oversize_record` before anything is allocated.
    public static let maximumPayloadLength = 65 * 1024

    /// When the packet was logged, in nanoseconds since the Unix epoch.
    public var timestamp: Timestamp
    /// Controller index (hciN); 0 for single-controller formats, the interface id for pcapng H4.
    public var adapterIndex: UInt16
    public var direction: HCIDirection
    public var kind: HCIPacketKind
    /// The packet without any capture framing or H4 type byte.
    public var payload: [UInt8]
    /// Length of the packet on the wire, when the capture truncated it (snap length); else `payload.count`.
    public var originalLength: Int
    /// File offset of the record (btsnoop/pcap record header, pcapng block header).
    public var fileOffset: Int64

    public init(
        timestamp: Timestamp, adapterIndex: UInt16 = 0, direction: HCIDirection, kind: HCIPacketKind,
        payload: [UInt8], originalLength: Int? = nil, fileOffset: Int64 = 0
    ) {
        self.timestamp = timestamp
        self.adapterIndex = adapterIndex
        self.direction = direction
        self.kind = kind
        self.payload = payload
        self.originalLength = originalLength ?? payload.count
        self.fileOffset = fileOffset
    }

    /// Microseconds since the Unix epoch (truncated toward negative infinity).
    public var unixMicroseconds: Int64 { timestamp.flooredMicroseconds }
}

/// A 48-bit Bluetooth device address, stored as on the wire (least significant byte first).
public struct BDAddress: Sendable, Hashable, CustomStringConvertible {
    /// Bytes in HCI order: `bytes[0]` is the last byte of the printed form.
    public var bytes: [UInt8]

    /// From 6 bytes in HCI (little-endian) order.
    public init(littleEndian bytes: some Collection<UInt8>) {
        precondition(bytes.count == 6, "a BD_ADDR has 6 bytes")
        self.bytes = Array(bytes)
    }

    /// From the printed form `00:AA:01:01:00:01`; nil if it isn't six hex pairs.
    public init?(_ text: String) {
        let parts = text.split(separator: ":")
        guard parts.count == 6 else { return nil }
        var b: [UInt8] = []
        for p in parts.reversed() {
            guard p.count == 2, let v = UInt8(p, radix: 16) else { return nil }
            b.append(v)
        }
        bytes = b
    }

    public static let zero = BDAddress(littleEndian: [0, 0, 0, 0, 0, 0])

    public var description: String { text(random: false) }

    /// ``description``, with `/random` after it when `random` (how a session names a peer): written
    /// straight into the string's storage (every connection names its peer).
    func text(random: Bool) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 3 + 7) { out in
            var n = 0
            for b in bytes.reversed() {
                if n > 0 { out[n] = 0x3A; n += 1 }
                out[n] = Hex.digit(b >> 4, uppercase: true)
                out[n + 1] = Hex.digit(b & 0xF, uppercase: true)
                n += 2
            }
            if random {
                for c in "/random".utf8 { out[n] = c; n += 1 }
            }
            return n
        }
    }
}

extension ByteReader {
    mutating func readAddress() -> BDAddress? {
        guard let b = readBytes(6) else { return nil }
        return BDAddress(littleEndian: b)
    }
}
