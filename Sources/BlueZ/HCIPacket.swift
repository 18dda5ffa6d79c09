// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Transport

/// An HCI command (Core Spec Vol 4 Part E §5.4.1): opcode = OGF << 10 | OCF, then parameters.
public struct HCICommand: Sendable, Hashable, CustomStringConvertible {
    public var opcode: UInt16
    public var parameters: [UInt8]

    public init(opcode: UInt16, parameters: [UInt8] = []) {
        precondition(parameters.count <= 255, "HCI command parameters are at most 255 bytes")
        self.opcode = opcode
        self.parameters = parameters
    }

    /// The H4 packet written to a raw HCI socket: `01`, opcode (LE), length, parameters.
    public var packet: [UInt8] {
        [0x01, UInt8(opcode & 0xFF), UInt8(opcode >> 8), UInt8(parameters.count)] + parameters
    }

    public var description: String { "HCI command 0x\(String(opcode, radix: 16)) [\(Hex.encode(parameters))]" }

    // LE Controller commands (OGF 0x08), Core Spec Vol 4 Part E §7.8.

    /// LE Set Advertising Parameters (0x2006). Intervals in 0.625 ms units (0x0020…0x4000).
    ///
    /// - Parameter type: 0 ADV_IND (connectable, scannable), 2 ADV_SCAN_IND, 3 ADV_NONCONN_IND.
    public static func leSetAdvertisingParameters(
        intervalMin: UInt16 = 0x00A0, intervalMax: UInt16 = 0x00F0, type: UInt8 = 0x00,
        ownAddressType: UInt8 = 0x00, channelMap: UInt8 = 0x07, filterPolicy: UInt8 = 0x00
    ) -> HCICommand {
        var w = ByteWriter()
        w.write(UInt16(intervalMin))
        w.write(UInt16(intervalMax))
        w.write(UInt8(type))
        w.write(UInt8(ownAddressType))
        w.write(UInt8(0))  // peer address type (directed advertising only)
        w.write(contentsOf: [0, 0, 0, 0, 0, 0] as [UInt8])  // peer address
        w.write(UInt8(channelMap))
        w.write(UInt8(filterPolicy))
        return HCICommand(opcode: 0x2006, parameters: w.bytes)
    }

    /// LE Set Advertising Data (0x2008): length, then the data zero-padded to 31 bytes.
    public static func leSetAdvertisingData(_ data: [UInt8]) -> HCICommand {
        precondition(data.count <= 31, "legacy advertising data is at most 31 bytes")
        return HCICommand(
            opcode: 0x2008, parameters: [UInt8(data.count)] + data + Array(repeating: 0, count: 31 - data.count))
    }

    /// LE Set Scan Response Data (0x2009): length, then the data zero-padded to 31 bytes.
    public static func leSetScanResponseData(_ data: [UInt8]) -> HCICommand {
        precondition(data.count <= 31, "legacy scan response data is at most 31 bytes")
        return HCICommand(
            opcode: 0x2009, parameters: [UInt8(data.count)] + data + Array(repeating: 0, count: 31 - data.count))
    }

    /// LE Set Advertising Enable (0x200A).
    public static func leSetAdvertisingEnable(_ on: Bool) -> HCICommand {
        HCICommand(opcode: 0x200A, parameters: [on ? 1 : 0])
    }

    /// LE Set Scan Parameters (0x200B). Interval and window in 0.625 ms units.
    public static func leSetScanParameters(
        active: Bool = true, interval: UInt16 = 0x0010, window: UInt16 = 0x0010,
        ownAddressType: UInt8 = 0x00, filterPolicy: UInt8 = 0x00
    ) -> HCICommand {
        var w = ByteWriter()
        w.write(UInt8(active ? 1 : 0))
        w.write(UInt16(interval))
        w.write(UInt16(window))
        w.write(UInt8(ownAddressType))
        w.write(UInt8(filterPolicy))
        return HCICommand(opcode: 0x200B, parameters: w.bytes)
    }

    /// LE Set Scan Enable (0x200C).
    public static func leSetScanEnable(_ on: Bool, filterDuplicates: Bool = false) -> HCICommand {
        HCICommand(opcode: 0x200C, parameters: [on ? 1 : 0, filterDuplicates ? 1 : 0])
    }
}

/// An HCI event (Core Spec Vol 4 Part E §5.4.4, §7.7) as read from a raw HCI socket.
public enum HCIEvent: Sendable, Hashable {
    /// Command Complete (0x0E): the opcode and its return parameters (status first, usually).
    case commandComplete(opcode: UInt16, returnParameters: [UInt8])
    /// Command Status (0x0F).
    case commandStatus(status: UInt8, opcode: UInt16)
    /// Disconnection Complete (0x05).
    case disconnectionComplete(status: UInt8, handle: UInt16, reason: UInt8)
    /// LE Meta event (0x3E) with its subevent code and the rest.
    case leMeta(subevent: UInt8, parameters: [UInt8])
    /// Anything else.
    case other(code: UInt8, parameters: [UInt8])

    /// Parses an H4 event packet (`04`, code, length, parameters).
    ///
    /// - Throws: ``HCIParseError`` for a packet that is not an event, or whose length is wrong.
    public init(packet: [UInt8]) throws(HCIParseError) {
        guard packet.count >= 3 else { throw HCIParseError("HCI packet of \(packet.count) bytes is too short") }
        guard packet[0] == 0x04 else {
            throw HCIParseError("not an HCI event packet (type 0x\(String(packet[0], radix: 16)))")
        }
        let code = packet[1]
        let length = Int(packet[2])
        guard packet.count - 3 == length else {
            throw HCIParseError(
                "HCI event 0x\(String(code, radix: 16)) says \(length) parameter bytes, has \(packet.count - 3)")
        }
        let p = Array(packet[3...])
        switch code {
        case 0x0E:
            guard p.count >= 3 else { throw HCIParseError("Command Complete too short") }
            self = .commandComplete(opcode: UInt16(p[1]) | UInt16(p[2]) << 8, returnParameters: Array(p[3...]))
        case 0x0F:
            guard p.count >= 4 else { throw HCIParseError("Command Status too short") }
            self = .commandStatus(status: p[0], opcode: UInt16(p[2]) | UInt16(p[3]) << 8)
        case 0x05:
            guard p.count >= 4 else { throw HCIParseError("Disconnection Complete too short") }
            self = .disconnectionComplete(
                status: p[0], handle: (UInt16(p[1]) | UInt16(p[2]) << 8) & 0x0FFF, reason: p[3])
        case 0x3E:
            guard p.count >= 1 else { throw HCIParseError("LE Meta event without a subevent") }
            self = .leMeta(subevent: p[0], parameters: Array(p[1...]))
        default:
            self = .other(code: code, parameters: p)
        }
    }
}

/// A malformed HCI packet.
public struct HCIParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// HCI status codes cuff explains (Core Spec Vol 1 Part F).
enum HCIStatus {
    /// Command Disallowed (0x0C): the controller cannot do this now (already scanning, advertising).
    static let commandDisallowed: UInt8 = 0x0C

    static func describe(_ status: UInt8) -> String {
        let name: String =
            switch status {
            case 0x00: "success"
            case 0x01: "unknown HCI command"
            case 0x02: "unknown connection identifier"
            case 0x0C: "command disallowed"
            case 0x0D: "connection rejected: limited resources"
            case 0x11: "unsupported feature or parameter"
            case 0x12: "invalid HCI command parameters"
            case 0x13: "remote user terminated connection"
            case 0x16: "connection terminated by local host"
            case 0x3E: "connection failed to be established"
            default: "status"
            }
        return "\(name) (0x\(status < 0x10 ? "0" : "")\(String(status, radix: 16)))"
    }
}
