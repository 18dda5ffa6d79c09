// SPDX-License-Identifier: GPL-2.0-or-later
//
// The kernel's Bluetooth Management protocol (BlueZ doc/mgmt-api.txt), the subset cuff uses.
// Debian's libbluetooth-dev doesn't install <bluetooth/mgmt.h>, so the numbers are here.

import CuffCore
import Transport

/// One MGMT packet: command or event code, controller index, parameters (all little-endian).
public struct MGMTPacket: Sendable, Hashable {
    public var code: UInt16
    /// Controller index (`hciN`'s N), 0xFFFF for none.
    public var index: UInt16
    public var parameters: [UInt8]

    public init(code: UInt16, index: UInt16, parameters: [UInt8] = []) {
        self.code = code
        self.index = index
        self.parameters = parameters
    }

    /// Header (code, index, length) then parameters.
    public var encoded: [UInt8] {
        var w = ByteWriter()
        w.write(code)
        w.write(index)
        w.write(UInt16(parameters.count))
        w.write(contentsOf: parameters)
        return w.bytes
    }

    /// Parses one packet as read from the control socket.
    public init(parsing bytes: [UInt8]) throws(MGMTParseError) {
        var r = ByteReader(bytes)
        guard let code = r.readUInt16(), let index = r.readUInt16(), let length = r.readUInt16() else {
            throw MGMTParseError("MGMT packet of \(bytes.count) bytes has no complete header")
        }
        guard r.remaining == Int(length) else {
            throw MGMTParseError(
                "MGMT packet 0x\(String(code, radix: 16)) says \(length) parameter bytes, has \(r.remaining)")
        }
        self.init(code: code, index: index, parameters: Array(r.readRemaining()))
    }
}

/// A malformed MGMT packet.
public struct MGMTParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// An address as MGMT carries it: 6 bytes little-endian, then a type (0 BR/EDR, 1 LE public,
/// 2 LE random). The raw type is kept so replies echo exactly what the kernel sent.
public struct MGMTAddress: Sendable, Hashable, CustomStringConvertible {
    public var address: BluetoothAddress
    public var typeCode: UInt8

    public init(_ address: BluetoothAddress, typeCode: UInt8) {
        self.address = address
        self.typeCode = typeCode
    }

    init?(_ r: inout ByteReader) {
        guard let bytes = r.readBytes(6), let type = r.readUInt8() else { return nil }
        address = BluetoothAddress(littleEndianOctets: bytes, type: type == 2 ? .random : .public)
        typeCode = type
    }

    var encoded: [UInt8] { address.littleEndianOctets + [typeCode] }

    public var description: String {
        "\(address) (\(typeCode == 0 ? "BR/EDR" : typeCode == 1 ? "LE public" : typeCode == 2 ? "LE random" : "type \(typeCode)"))"
    }
}

/// The MGMT events cuff reacts to.
public enum MGMTEvent: Sendable, Hashable {
    /// 0x0001: a command finished.
    case commandComplete(opcode: UInt16, status: UInt8, returnParameters: [UInt8])
    /// 0x0002: a command failed or is pending.
    case commandStatus(opcode: UInt16, status: UInt8)
    /// 0x000A: a Long Term Key was made (pairing finished).
    case newLongTermKey(MGMTAddress, storeHint: UInt8)
    /// 0x000B.
    case deviceConnected(MGMTAddress)
    /// 0x000C.
    case deviceDisconnected(MGMTAddress, reason: UInt8)
    /// 0x000F: confirm a pairing (numeric comparison; `confirmHint` 1 = Just Works, just accept).
    case userConfirmationRequest(MGMTAddress, confirmHint: UInt8, value: UInt32)
    /// 0x0010: enter the peer's passkey.
    case userPasskeyRequest(MGMTAddress)
    /// 0x0011: pairing failed with an MGMT status.
    case authenticationFailed(MGMTAddress, status: UInt8)
    /// Anything else.
    case other(code: UInt16, parameters: [UInt8])

    /// Decodes the event in `packet`.
    ///
    /// - Throws: ``MGMTParseError`` when a known event is too short.
    public init(_ packet: MGMTPacket) throws(MGMTParseError) {
        var r = ByteReader(packet.parameters)
        func short() -> MGMTParseError {
            MGMTParseError(
                "MGMT event 0x\(String(packet.code, radix: 16)) too short (\(packet.parameters.count) bytes)")
        }
        switch packet.code {
        case 0x0001:
            guard let op = r.readUInt16(), let status = r.readUInt8() else { throw short() }
            self = .commandComplete(opcode: op, status: status, returnParameters: Array(r.readRemaining()))
        case 0x0002:
            guard let op = r.readUInt16(), let status = r.readUInt8() else { throw short() }
            self = .commandStatus(opcode: op, status: status)
        case 0x000A:
            guard let hint = r.readUInt8(), let a = MGMTAddress(&r) else { throw short() }
            self = .newLongTermKey(a, storeHint: hint)
        case 0x000B:
            guard let a = MGMTAddress(&r) else { throw short() }
            self = .deviceConnected(a)
        case 0x000C:
            guard let a = MGMTAddress(&r), let reason = r.readUInt8() else { throw short() }
            self = .deviceDisconnected(a, reason: reason)
        case 0x000F:
            guard let a = MGMTAddress(&r), let hint = r.readUInt8(), let value = r.readUInt32() else { throw short() }
            self = .userConfirmationRequest(a, confirmHint: hint, value: value)
        case 0x0010:
            guard let a = MGMTAddress(&r) else { throw short() }
            self = .userPasskeyRequest(a)
        case 0x0011:
            guard let a = MGMTAddress(&r), let status = r.readUInt8() else { throw short() }
            self = .authenticationFailed(a, status: status)
        default:
            self = .other(code: packet.code, parameters: packet.parameters)
        }
    }
}

/// MGMT commands cuff sends.
public enum MGMTCommand {
    public static let userConfirmationReplyCode: UInt16 = 0x001C
    public static let userConfirmationNegativeReplyCode: UInt16 = 0x001D
    public static let userPasskeyReplyCode: UInt16 = 0x001E

    /// User Confirmation Reply (0x001C): accept the pairing.
    public static func userConfirmationReply(index: UInt16, _ address: MGMTAddress) -> MGMTPacket {
        MGMTPacket(code: userConfirmationReplyCode, index: index, parameters: address.encoded)
    }

    /// User Confirmation Negative Reply (0x001D): refuse it.
    public static func userConfirmationNegativeReply(index: UInt16, _ address: MGMTAddress) -> MGMTPacket {
        MGMTPacket(code: userConfirmationNegativeReplyCode, index: index, parameters: address.encoded)
    }

    /// User Passkey Reply (0x001E).
    public static func userPasskeyReply(index: UInt16, _ address: MGMTAddress, passkey: UInt32) -> MGMTPacket {
        var w = ByteWriter()
        w.write(contentsOf: address.encoded)
        w.write(passkey)
        return MGMTPacket(code: userPasskeyReplyCode, index: index, parameters: w.bytes)
    }

    /// MGMT_STATUS_NOT_PAIRED (mgmt-api.txt "Error Codes").
    public static let notPairedStatus: UInt8 = 0x06

    /// What an MGMT status means (mgmt-api.txt "Error Codes").
    public static func describe(status: UInt8) -> String {
        let name: String =
            switch status {
            case 0x00: "success"
            case 0x03: "failed"
            case 0x04: "connect failed"
            case 0x05: "authentication failed"
            case 0x02: "not connected"
            case 0x06: "not paired"
            case 0x08: "not supported"
            case 0x0A: "busy"
            case 0x0B: "rejected"
            case 0x0D: "invalid parameters"
            case 0x0E: "disconnected"
            case 0x0F: "not powered"
            case 0x11: "invalid index"
            case 0x14: "permission denied"
            default: "status"
            }
        return "\(name) (0x\(status < 0x10 ? "0" : "")\(String(status, radix: 16)))"
    }
}
