// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// The local controller's role in a connection.
public enum ConnectionRole: Sendable, Hashable {
    case central
    case peripheral
}

/// Which way an ATT PDU travelled.
public enum ATTDirection: Sendable, Hashable {
    /// Sent by the host that logged the capture (HCI ACL TX).
    case fromLocal
    /// Received by the host that logged the capture (HCI ACL RX).
    case toLocal
    /// Air sniffer captures (LINKTYPE 256), when the pseudo-header says which way.
    case centralToPeripheral
    case peripheralToCentral
    /// Air sniffer captures whose pseudo-header doesn't say.
    case unknown
}

/// An LE address type as HCI reports it (Core Vol 4 Part E §7.7.65.1).
public struct AddressType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let `public` = AddressType(rawValue: 0)
    public static let random = AddressType(rawValue: 1)
    public static let publicIdentity = AddressType(rawValue: 2)
    public static let randomIdentity = AddressType(rawValue: 3)
    public var description: String {
        switch rawValue {
        case 0: "public"
        case 1: "random"
        case 2: "public-identity"
        case 3: "random-identity"
        default: "0x" + String(rawValue, radix: 16)
        }
    }
}

/// A connection that came up: HCI LE (Enhanced) Connection Complete, or a sniffed CONNECT_IND.
public struct ConnectionInfo: Sendable, Hashable {
    public var adapter: UInt16
    public var connectionHandle: UInt16
    /// The local controller's role; for sniffed connections, the initiator's view (always `.central`).
    public var role: ConnectionRole
    public var peerAddress: BDAddress
    public var peerAddressType: AddressType
    /// The link's access address, for sniffed connections.
    public var accessAddress: UInt32?
    public var timestamp: Timestamp
    public var fileOffset: Int64

    public init(
        adapter: UInt16, connectionHandle: UInt16, role: ConnectionRole, peerAddress: BDAddress,
        peerAddressType: AddressType, accessAddress: UInt32? = nil, timestamp: Timestamp, fileOffset: Int64
    ) {
        self.adapter = adapter
        self.connectionHandle = connectionHandle
        self.role = role
        self.peerAddress = peerAddress
        self.peerAddressType = peerAddressType
        self.accessAddress = accessAddress
        self.timestamp = timestamp
        self.fileOffset = fileOffset
    }
}

/// One complete ATT PDU (an L2CAP frame on CID 0x0004), reassembled.
public struct ATTPacket: Sendable, Hashable {
    public var adapter: UInt16
    /// The HCI connection handle; for sniffed links, a number given to each access address in order of appearance.
    public var connectionHandle: UInt16
    public var direction: ATTDirection
    /// The ATT PDU: opcode, then parameters.
    public var pdu: [UInt8]
    /// Timestamp of the record that carried the frame's first fragment.
    public var timestamp: Timestamp
    /// File offset of the record that carried the frame's first fragment.
    public var fileOffset: Int64
    /// False when no connection event for this handle was seen (capture started mid-connection).
    public var connectionKnown: Bool
    /// The link's access address, for sniffed links.
    public var accessAddress: UInt32?

    public init(
        adapter: UInt16, connectionHandle: UInt16, direction: ATTDirection, pdu: [UInt8], timestamp: Timestamp,
        fileOffset: Int64, connectionKnown: Bool, accessAddress: UInt32? = nil
    ) {
        self.adapter = adapter
        self.connectionHandle = connectionHandle
        self.direction = direction
        self.pdu = pdu
        self.timestamp = timestamp
        self.fileOffset = fileOffset
        self.connectionKnown = connectionKnown
        self.accessAddress = accessAddress
    }
}

/// A connection that went down: HCI Disconnection Complete, or a sniffed LL_TERMINATE_IND.
public struct Disconnection: Sendable, Hashable {
    public var adapter: UInt16
    public var connectionHandle: UInt16
    /// HCI error code (0x13 remote user terminated, 0x16 local host terminated, 0x08 timeout…).
    public var reason: UInt8
    public var timestamp: Timestamp
    public var fileOffset: Int64
    /// Why the link ended when no Disconnection Complete said so (its controller was removed):
    /// said instead of the reason's name.
    public var cause: String?

    public init(
        adapter: UInt16, connectionHandle: UInt16, reason: UInt8, timestamp: Timestamp, fileOffset: Int64,
        cause: String? = nil
    ) {
        self.adapter = adapter
        self.connectionHandle = connectionHandle
        self.reason = reason
        self.timestamp = timestamp
        self.fileOffset = fileOffset
        self.cause = cause
    }
}

/// What ``ATTExtractor`` gets out of a capture.
public enum CaptureEvent: Sendable, Hashable {
    case connected(ConnectionInfo)
    case att(ATTPacket)
    case disconnected(Disconnection)
    /// A fragment or frame that was skipped (`acl_out_of_order`, `l2cap_length_mismatch`,
    /// `malformed_packet`); the extraction goes on.
    case warning(CaptureError)

    /// The ATT packet, if this is one.
    public var att: ATTPacket? {
        if case .att(let p) = self { return p }
        return nil
    }
}
