// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// One ATT PDU, as carried whole by an L2CAP SDU on the ATT fixed channel (Core Vol 3 Part F §3.4).
///
/// Parsing is strict: fixed-size PDUs must have exactly their size, lists must be non-empty and
/// their element size must divide the data. Opcodes this package does not model parse as
/// ``unknown(opcode:payload:)`` and encode back unchanged.
public enum ATTPDU: Sendable, Hashable {
    /// §3.4.1.1: the request that failed, the handle in error (0 when none) and why.
    case errorResponse(request: ATTOpcode, handle: UInt16, error: ATTErrorCode)
    /// §3.4.2.1: the client's receive MTU.
    case exchangeMTURequest(clientMTU: UInt16)
    /// §3.4.2.2: the server's receive MTU.
    case exchangeMTUResponse(serverMTU: UInt16)
    /// §3.4.3.1
    case findInformationRequest(start: UInt16, end: UInt16)
    /// §3.4.3.2: encoded in format 1 when every UUID has a 16-bit alias, else format 2 (128-bit).
    /// (So a format-2 entry holding a Base-UUID alias re-encodes in format 1.)
    case findInformationResponse([HandleUUID])
    /// §3.4.3.3: the type is always a 16-bit UUID.
    case findByTypeValueRequest(start: UInt16, end: UInt16, type: UInt16, value: [UInt8])
    /// §3.4.3.4
    case findByTypeValueResponse([HandlesInformation])
    /// §3.4.4.1: the type is 2 or 16 bytes on the wire.
    case readByTypeRequest(start: UInt16, end: UInt16, type: BluetoothUUID)
    /// §3.4.4.2: every value has the same length. The encoder cuts values to 253 bytes and writes
    /// only the leading run of entries whose value length equals the first entry's, as a server must.
    case readByTypeResponse([HandleValue])
    /// §3.4.4.3
    case readRequest(handle: UInt16)
    /// §3.4.4.4
    case readResponse(value: [UInt8])
    /// §3.4.4.5
    case readBlobRequest(handle: UInt16, offset: UInt16)
    /// §3.4.4.6
    case readBlobResponse(value: [UInt8])
    /// §3.4.4.9: the group type is 2 or 16 bytes on the wire.
    case readByGroupTypeRequest(start: UInt16, end: UInt16, type: BluetoothUUID)
    /// §3.4.4.10: every value has the same length; encoded like ``readByTypeResponse(_:)``, with
    /// values cut to 251 bytes.
    case readByGroupTypeResponse([GroupValue])
    /// §3.4.5.1
    case writeRequest(handle: UInt16, value: [UInt8])
    /// §3.4.5.2
    case writeResponse
    /// §3.4.5.3
    case writeCommand(handle: UInt16, value: [UInt8])
    /// §3.4.7.1
    case handleValueNotification(handle: UInt16, value: [UInt8])
    /// §3.4.7.2
    case handleValueIndication(handle: UInt16, value: [UInt8])
    /// §3.4.7.3
    case handleValueConfirmation
    /// Any other opcode, with the bytes after it.
    case unknown(opcode: ATTOpcode, payload: [UInt8])

    /// A handle and the UUID of the attribute there (Find Information Response).
    public struct HandleUUID: Hashable, Sendable {
        public var handle: UInt16
        public var uuid: BluetoothUUID
        public init(handle: UInt16, uuid: BluetoothUUID) { self.handle = handle; self.uuid = uuid }
    }

    /// A found attribute handle and the end of its group (Find By Type Value Response).
    public struct HandlesInformation: Hashable, Sendable {
        public var foundHandle: UInt16
        public var groupEndHandle: UInt16
        public init(foundHandle: UInt16, groupEndHandle: UInt16) {
            self.foundHandle = foundHandle
            self.groupEndHandle = groupEndHandle
        }
    }

    /// A handle and the (possibly truncated) value there (Read By Type Response).
    public struct HandleValue: Hashable, Sendable {
        public var handle: UInt16
        public var value: [UInt8]
        public init(handle: UInt16, value: [UInt8]) { self.handle = handle; self.value = value }
    }

    /// A group's first and last handle and its value (Read By Group Type Response).
    public struct GroupValue: Hashable, Sendable {
        public var handle: UInt16
        public var endGroupHandle: UInt16
        public var value: [UInt8]
        public init(handle: UInt16, endGroupHandle: UInt16, value: [UInt8]) {
            self.handle = handle
            self.endGroupHandle = endGroupHandle
            self.value = value
        }
    }

    /// The opcode this PDU encodes with.
    public var opcode: ATTOpcode {
        switch self {
        case .errorResponse: .errorResponse
        case .exchangeMTURequest: .exchangeMTURequest
        case .exchangeMTUResponse: .exchangeMTUResponse
        case .findInformationRequest: .findInformationRequest
        case .findInformationResponse: .findInformationResponse
        case .findByTypeValueRequest: .findByTypeValueRequest
        case .findByTypeValueResponse: .findByTypeValueResponse
        case .readByTypeRequest: .readByTypeRequest
        case .readByTypeResponse: .readByTypeResponse
        case .readRequest: .readRequest
        case .readResponse: .readResponse
        case .readBlobRequest: .readBlobRequest
        case .readBlobResponse: .readBlobResponse
        case .readByGroupTypeRequest: .readByGroupTypeRequest
        case .readByGroupTypeResponse: .readByGroupTypeResponse
        case .writeRequest: .writeRequest
        case .writeResponse: .writeResponse
        case .writeCommand: .writeCommand
        case .handleValueNotification: .handleValueNotification
        case .handleValueIndication: .handleValueIndication
        case .handleValueConfirmation: .handleValueConfirmation
        case let .unknown(opcode, _): opcode
        }
    }

    // MARK: Parsing

    public init(parsing bytes: [UInt8]) throws(ATTDecodingError) {
        try self.init(parsing: bytes[...])
    }

    /// Parses one whole PDU.
    ///
    /// - Throws: ``ATTDecodingError`` naming the opcode and the offset of the bad field.
    public init(parsing bytes: ArraySlice<UInt8>) throws(ATTDecodingError) {
        var r = ByteReader(bytes)
        guard let raw = r.readUInt8() else {
            throw ATTDecodingError(.empty, opcode: nil, offset: 0, "no opcode")
        }
        var p = FieldReader(reader: r, opcode: ATTOpcode(raw))
        switch p.opcode {
        case .errorResponse:
            let request = try p.u8("request opcode")
            let handle = try p.u16("attribute handle")
            let code = try p.u8("error code")
            self = .errorResponse(request: ATTOpcode(request), handle: handle, error: ATTErrorCode(code))
        case .exchangeMTURequest:
            self = .exchangeMTURequest(clientMTU: try p.u16("client rx MTU"))
        case .exchangeMTUResponse:
            self = .exchangeMTUResponse(serverMTU: try p.u16("server rx MTU"))
        case .findInformationRequest:
            self = .findInformationRequest(start: try p.u16("starting handle"), end: try p.u16("ending handle"))
        case .findInformationResponse:
            let formatOffset = p.reader.offset
            let format = try p.u8("format")
            let size: Int
            switch format {
            case 1: size = 4
            case 2: size = 18
            default:
                throw p.error(
                    .invalidFormat, at: formatOffset, "format \(format) is neither 1 (16-bit) nor 2 (128-bit)")
            }
            self = .findInformationResponse(
                try p.list("information data", elementSize: size) { r in
                    let handle = r.readUInt16()!
                    return HandleUUID(handle: handle, uuid: BluetoothUUID(littleEndian: r.readRemaining())!)
                })
        case .findByTypeValueRequest:
            let start = try p.u16("starting handle"), end = try p.u16("ending handle")
            let type = try p.u16("attribute type")
            self = .findByTypeValueRequest(start: start, end: end, type: type, value: Array(p.reader.readRemaining()))
        case .findByTypeValueResponse:
            self = .findByTypeValueResponse(
                try p.list("handles information", elementSize: 4) { r in
                    HandlesInformation(foundHandle: r.readUInt16()!, groupEndHandle: r.readUInt16()!)
                })
        case .readByTypeRequest:
            let start = try p.u16("starting handle"), end = try p.u16("ending handle")
            self = .readByTypeRequest(start: start, end: end, type: try p.uuid("attribute type"))
        case .readByTypeResponse:
            let length = try p.lengthByte(minimum: 2)
            self = .readByTypeResponse(
                try p.list("attribute data", elementSize: length) { r in
                    HandleValue(handle: r.readUInt16()!, value: Array(r.readRemaining()))
                })
        case .readRequest:
            self = .readRequest(handle: try p.u16("attribute handle"))
        case .readResponse:
            self = .readResponse(value: Array(p.reader.readRemaining()))
        case .readBlobRequest:
            self = .readBlobRequest(handle: try p.u16("attribute handle"), offset: try p.u16("value offset"))
        case .readBlobResponse:
            self = .readBlobResponse(value: Array(p.reader.readRemaining()))
        case .readByGroupTypeRequest:
            let start = try p.u16("starting handle"), end = try p.u16("ending handle")
            self = .readByGroupTypeRequest(start: start, end: end, type: try p.uuid("attribute group type"))
        case .readByGroupTypeResponse:
            let length = try p.lengthByte(minimum: 4)
            self = .readByGroupTypeResponse(
                try p.list("attribute data", elementSize: length) { r in
                    GroupValue(
                        handle: r.readUInt16()!, endGroupHandle: r.readUInt16()!, value: Array(r.readRemaining()))
                })
        case .writeRequest:
            self = .writeRequest(handle: try p.u16("attribute handle"), value: Array(p.reader.readRemaining()))
        case .writeResponse:
            self = .writeResponse
        case .writeCommand:
            self = .writeCommand(handle: try p.u16("attribute handle"), value: Array(p.reader.readRemaining()))
        case .handleValueNotification:
            self = .handleValueNotification(
                handle: try p.u16("attribute handle"), value: Array(p.reader.readRemaining()))
        case .handleValueIndication:
            self = .handleValueIndication(handle: try p.u16("attribute handle"), value: Array(p.reader.readRemaining()))
        case .handleValueConfirmation:
            self = .handleValueConfirmation
        default:
            self = .unknown(opcode: p.opcode, payload: Array(p.reader.readRemaining()))
        }
        try p.finish()
    }

    /// ``init(parsing:)`` for the commonest PDUs of a session when they are well formed, read
    /// straight from `raw` (no copy into an array first, no field reader): requests and answers
    /// that carry at most one value (reads, writes, notifications, indications, errors, MTU
    /// exchange, and discovery requests with a 16-bit type). Nil for any other PDU and for a
    /// malformed one: ``init(parsing:)`` decides those (and gives the error).
    public init?(wellFormed raw: UnsafeRawBufferPointer) {
        let n = raw.count
        guard n >= 1 else { return nil }
        func u16(_ i: Int) -> UInt16 { UInt16(raw[i]) | UInt16(raw[i + 1]) << 8 }
        func rest(_ from: Int) -> [UInt8] { Array(UnsafeRawBufferPointer(rebasing: raw[from...])) }
        // (Literal opcodes: the named constants are globals that are read through an accessor.)
        switch raw[0] {
        case 0x01 where n == 5:
            self = .errorResponse(request: ATTOpcode(raw[1]), handle: u16(2), error: ATTErrorCode(raw[4]))
        case 0x02 where n == 3: self = .exchangeMTURequest(clientMTU: u16(1))
        case 0x03 where n == 3: self = .exchangeMTUResponse(serverMTU: u16(1))
        case 0x04 where n == 5: self = .findInformationRequest(start: u16(1), end: u16(3))
        case 0x08 where n == 7: self = .readByTypeRequest(start: u16(1), end: u16(3), type: BluetoothUUID(u16(5)))
        case 0x0A where n == 3: self = .readRequest(handle: u16(1))
        case 0x0B: self = .readResponse(value: rest(1))
        case 0x0C where n == 5: self = .readBlobRequest(handle: u16(1), offset: u16(3))
        case 0x0D: self = .readBlobResponse(value: rest(1))
        case 0x10 where n == 7: self = .readByGroupTypeRequest(start: u16(1), end: u16(3), type: BluetoothUUID(u16(5)))
        case 0x12 where n >= 3: self = .writeRequest(handle: u16(1), value: rest(3))
        case 0x13 where n == 1: self = .writeResponse
        case 0x1B where n >= 3: self = .handleValueNotification(handle: u16(1), value: rest(3))
        case 0x1D where n >= 3: self = .handleValueIndication(handle: u16(1), value: rest(3))
        case 0x1E where n == 1: self = .handleValueConfirmation
        case 0x52 where n >= 3: self = .writeCommand(handle: u16(1), value: rest(3))
        default: return nil
        }
    }

    // MARK: Encoding

    /// The PDU's bytes, opcode first.
    public var bytes: [UInt8] {
        var w = ByteWriter()
        encode(into: &w)
        return w.bytes
    }

    /// Appends the PDU's bytes, opcode first.
    public func encode(into w: inout ByteWriter) {
        w.write(opcode.rawValue)
        switch self {
        case let .errorResponse(request, handle, error):
            w.write(request.rawValue)
            w.write(handle)
            w.write(error.rawValue)
        case let .exchangeMTURequest(mtu), let .exchangeMTUResponse(mtu):
            w.write(mtu)
        case let .findInformationRequest(start, end):
            w.write(start)
            w.write(end)
        case let .findInformationResponse(list):
            let short = list.allSatisfy { $0.uuid.uuid16 != nil }
            w.write(short ? UInt8(1) : 2)
            for item in list {
                w.write(item.handle)
                if short {
                    w.write(item.uuid.uuid16!)
                } else {
                    w.write(item.uuid.low)
                    w.write(item.uuid.high)
                }
            }
        case let .findByTypeValueRequest(start, end, type, value):
            w.write(start)
            w.write(end)
            w.write(type)
            w.write(contentsOf: value)
        case let .findByTypeValueResponse(list):
            for item in list {
                w.write(item.foundHandle)
                w.write(item.groupEndHandle)
            }
        case let .readByTypeRequest(start, end, type), let .readByGroupTypeRequest(start, end, type):
            w.write(start)
            w.write(end)
            w.write(contentsOf: type.littleEndianBytes)
        case let .readByTypeResponse(list):
            let size = min(list.first?.value.count ?? 0, 253)
            w.write(UInt8(2 + size))
            for item in list.prefix(while: { min($0.value.count, 253) == size }) {
                w.write(item.handle)
                w.write(contentsOf: item.value.prefix(size))
            }
        case let .readByGroupTypeResponse(list):
            let size = min(list.first?.value.count ?? 0, 251)
            w.write(UInt8(4 + size))
            for item in list.prefix(while: { min($0.value.count, 251) == size }) {
                w.write(item.handle)
                w.write(item.endGroupHandle)
                w.write(contentsOf: item.value.prefix(size))
            }
        case let .readRequest(handle):
            w.write(handle)
        case let .readResponse(value), let .readBlobResponse(value):
            w.write(contentsOf: value)
        case let .readBlobRequest(handle, offset):
            w.write(handle)
            w.write(offset)
        case let .writeRequest(handle, value), let .writeCommand(handle, value),
            let .handleValueNotification(handle, value), let .handleValueIndication(handle, value):
            w.write(handle)
            w.write(contentsOf: value)
        case .writeResponse, .handleValueConfirmation:
            break
        case let .unknown(_, payload):
            w.write(contentsOf: payload)
        }
    }
}

/// A ByteReader that turns a short read into an ``ATTDecodingError`` naming the field.
private struct FieldReader {
    var reader: ByteReader
    let opcode: ATTOpcode

    func error(_ code: ATTDecodingError.Code, at offset: Int, _ message: String) -> ATTDecodingError {
        ATTDecodingError(code, opcode: opcode, offset: offset, message)
    }

    private func short(_ field: String, _ size: Int) -> ATTDecodingError {
        error(
            .truncated, at: reader.offset,
            "\(field) needs \(size) byte\(size == 1 ? "" : "s"), \(reader.remaining) left")
    }

    mutating func u8(_ field: String) throws(ATTDecodingError) -> UInt8 {
        guard let v = reader.readUInt8() else { throw short(field, 1) }
        return v
    }

    mutating func u16(_ field: String) throws(ATTDecodingError) -> UInt16 {
        guard let v = reader.readUInt16() else { throw short(field, 2) }
        return v
    }

    /// The rest of the PDU as a 2- or 16-byte UUID.
    mutating func uuid(_ field: String) throws(ATTDecodingError) -> BluetoothUUID {
        let at = reader.offset
        let rest = reader.readRemaining()
        guard let uuid = BluetoothUUID(littleEndian: rest) else {
            throw error(.invalidUUIDLength, at: at, "\(field) is \(rest.count) bytes, not 2 or 16")
        }
        return uuid
    }

    /// The length byte of a Read By (Group) Type Response: each element's size in bytes.
    mutating func lengthByte(minimum: Int) throws(ATTDecodingError) -> Int {
        let at = reader.offset
        let length = Int(try u8("length"))
        guard length >= minimum else {
            throw error(.invalidLength, at: at, "length \(length) is less than the \(minimum)-byte handle fields")
        }
        return length
    }

    /// The rest of the PDU as a non-empty list of `elementSize`-byte elements.
    mutating func list<T>(
        _ field: String, elementSize: Int, _ element: (inout ByteReader) -> T
    ) throws(ATTDecodingError) -> [T] {
        let at = reader.offset
        let rest = reader.remaining
        guard rest > 0, rest % elementSize == 0 else {
            throw error(
                .invalidLength, at: at,
                rest == 0
                    ? "\(field) is empty"
                    : "\(rest) bytes of \(field) are not a whole number of \(elementSize)-byte elements")
        }
        var out: [T] = []
        out.reserveCapacity(rest / elementSize)
        while let chunk = reader.readBytes(elementSize), !chunk.isEmpty {
            var r = ByteReader(chunk)
            out.append(element(&r))
        }
        return out
    }

    func finish() throws(ATTDecodingError) {
        guard reader.isAtEnd else {
            throw error(
                .trailingBytes, at: reader.offset,
                "\(reader.remaining) unexpected byte\(reader.remaining == 1 ? "" : "s") after the last field")
        }
    }
}
