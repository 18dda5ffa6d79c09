// SPDX-License-Identifier: GPL-2.0-or-later

/// Why a D-Bus message or handshake was refused. Parsing never traps: every length is bounded.
public enum DBusProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes end before the value they announce.
    case truncated(String)
    /// A length exceeds what we accept (``DBusMessage/maxMessageBytes``).
    case tooLong(String)
    /// Malformed content: endianness mark, version, string without NUL, bad signature…
    case malformed(String)
    /// A type this minimal client does not decode (in a header field).
    case unsupported(String)
    /// The SASL handshake failed (the server's line, sanitised).
    case authentication(String)

    public var description: String {
        switch self {
        case .truncated(let s): "D-Bus: truncated \(s)"
        case .tooLong(let s): "D-Bus: too long: \(s)"
        case .malformed(let s): "D-Bus: malformed \(s)"
        case .unsupported(let s): "D-Bus: unsupported \(s)"
        case .authentication(let s): "D-Bus: authentication failed: \(s)"
        }
    }
}

/// A basic D-Bus value (no containers: the agent's calls and replies need none).
public enum DBusValue: Sendable, Equatable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case string(String)
    case objectPath(String)
    case signature(String)

    /// The one-character type code.
    public var typeCode: Character {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        }
    }
}

/// Writes D-Bus wire format (little-endian); alignment is relative to the start of `bytes`,
/// which is the message start (the body starts 8-aligned, so body alignment is the same).
struct DBusWriter {
    var bytes: [UInt8] = []

    mutating func pad(to n: Int) {
        while bytes.count % n != 0 { bytes.append(0) }
    }

    mutating func u8(_ v: UInt8) { bytes.append(v) }

    mutating func u16(_ v: UInt16) {
        pad(to: 2)
        bytes.append(UInt8(v & 0xFF))
        bytes.append(UInt8(v >> 8))
    }

    mutating func u32(_ v: UInt32) {
        pad(to: 4)
        for i in 0..<4 { bytes.append(UInt8((v >> (8 * UInt32(i))) & 0xFF)) }
    }

    /// A string or object path: u32 length, bytes, NUL.
    mutating func string(_ s: String) {
        let utf8 = Array(s.utf8)
        u32(UInt32(utf8.count))
        bytes += utf8
        bytes.append(0)
    }

    /// A signature: u8 length, bytes, NUL.
    mutating func signature(_ s: String) {
        let utf8 = Array(s.utf8)
        bytes.append(UInt8(truncatingIfNeeded: utf8.count))
        bytes += utf8
        bytes.append(0)
    }

    mutating func value(_ v: DBusValue) {
        switch v {
        case .byte(let b): u8(b)
        case .boolean(let b): u32(b ? 1 : 0)
        case .int16(let n): u16(UInt16(bitPattern: n))
        case .uint16(let n): u16(n)
        case .int32(let n): u32(UInt32(bitPattern: n))
        case .uint32(let n): u32(n)
        case .string(let s), .objectPath(let s): string(s)
        case .signature(let s): signature(s)
        }
    }

    mutating func variant(_ v: DBusValue) {
        signature(String(v.typeCode))
        value(v)
    }
}

/// Reads D-Bus wire format of either byte order, bounds-checked; alignment relative to `base`.
struct DBusReader {
    let bytes: [UInt8]
    var position: Int
    let base: Int
    let bigEndian: Bool

    init(_ bytes: [UInt8], position: Int = 0, base: Int = 0, bigEndian: Bool) {
        self.bytes = bytes
        self.position = position
        self.base = base
        self.bigEndian = bigEndian
    }

    var remaining: Int { bytes.count - position }

    mutating func align(_ n: Int, _ what: String) throws(DBusProtocolError) {
        let off = (position - base) % n
        if off == 0 { return }
        let skip = n - off
        guard skip <= remaining else { throw .truncated("padding before \(what)") }
        position += skip
    }

    mutating func take(_ n: Int, _ what: String) throws(DBusProtocolError) -> ArraySlice<UInt8> {
        guard n >= 0, n <= remaining else { throw .truncated(what) }
        defer { position += n }
        return bytes[position..<(position + n)]
    }

    mutating func u8(_ what: String) throws(DBusProtocolError) -> UInt8 {
        try take(1, what).first!
    }

    mutating func u16(_ what: String) throws(DBusProtocolError) -> UInt16 {
        try align(2, what)
        let s = try take(2, what)
        let a = UInt16(s[s.startIndex]), b = UInt16(s[s.startIndex + 1])
        return bigEndian ? (a << 8 | b) : (b << 8 | a)
    }

    mutating func u32(_ what: String) throws(DBusProtocolError) -> UInt32 {
        try align(4, what)
        let s = try take(4, what)
        var v: UInt32 = 0
        for i in 0..<4 {
            let byte = UInt32(s[s.startIndex + (bigEndian ? i : 3 - i)])
            v = v << 8 | byte
        }
        return v
    }

    private mutating func text(count: Int, _ what: String) throws(DBusProtocolError) -> String {
        guard count <= remaining else { throw .truncated(what) }
        let body = try take(count, what)
        guard try u8(what) == 0 else { throw .malformed("\(what): no terminating NUL") }
        guard !body.contains(0) else { throw .malformed("\(what): embedded NUL") }
        guard let s = String(validating: body, as: UTF8.self) else { throw .malformed("\(what): not UTF-8") }
        return s
    }

    mutating func string(_ what: String) throws(DBusProtocolError) -> String {
        let n = try u32(what)
        guard n <= UInt32(remaining) else { throw .truncated("\(what) (\(n) bytes announced, \(remaining) left)") }
        return try text(count: Int(n), what)
    }

    mutating func signature(_ what: String) throws(DBusProtocolError) -> String {
        let n = Int(try u8(what))
        return try text(count: n, what)
    }

    mutating func value(_ code: Character, _ what: String) throws(DBusProtocolError) -> DBusValue {
        switch code {
        case "y": .byte(try u8(what))
        case "b":
            switch try u32(what) {
            case 0: .boolean(false)
            case 1: .boolean(true)
            default: throw .malformed("\(what): boolean not 0 or 1")
            }
        case "n": .int16(Int16(bitPattern: try u16(what)))
        case "q": .uint16(try u16(what))
        case "i": .int32(Int32(bitPattern: try u32(what)))
        case "u": .uint32(try u32(what))
        case "s": .string(try string(what))
        case "o": .objectPath(try string(what))
        case "g": .signature(try signature(what))
        default: throw .unsupported("type '\(code)' in \(what)")
        }
    }

    mutating func variant(_ what: String) throws(DBusProtocolError) -> DBusValue {
        let sig = try signature("\(what) signature")
        guard sig.count == 1, let code = sig.first else { throw .unsupported("variant of type '\(sig)' in \(what)") }
        return try value(code, what)
    }
}

/// One D-Bus message: header fields we use, and a body of basic values.
public struct DBusMessage: Sendable, Equatable {
    public enum Kind: UInt8, Sendable {
        case methodCall = 1
        case methodReturn = 2
        case error = 3
        case signal = 4
    }

    /// Flag: the caller wants no reply.
    public static let noReplyExpected: UInt8 = 0x01
    /// Largest message we accept (the spec allows 128 MiB; an agent's traffic is tiny).
    public static let maxMessageBytes = 1 << 20

    public var kind: Kind
    public var flags: UInt8 = 0
    public var serial: UInt32 = 0
    public var path: String?
    public var interface: String?
    public var member: String?
    public var errorName: String?
    public var replySerial: UInt32?
    public var destination: String?
    public var sender: String?
    /// The body's values (nil when the body holds types we don't decode; `signature` still says what).
    public var body: [DBusValue]?
    /// The body signature as received (or as derived from `body` when encoding).
    public var signature: String

    public init(
        kind: Kind, flags: UInt8 = 0, serial: UInt32 = 0, path: String? = nil, interface: String? = nil, member: String? = nil,
        errorName: String? = nil, replySerial: UInt32? = nil, destination: String? = nil, sender: String? = nil,
        body: [DBusValue] = []
    ) {
        self.kind = kind
        self.flags = flags
        self.serial = serial
        self.path = path
        self.interface = interface
        self.member = member
        self.errorName = errorName
        self.replySerial = replySerial
        self.destination = destination
        self.sender = sender
        self.body = body
        self.signature = String(body.map(\.typeCode))
    }

    /// A method call.
    public static func call(
        destination: String, path: String, interface: String, member: String, body: [DBusValue] = []
    ) -> DBusMessage {
        DBusMessage(kind: .methodCall, path: path, interface: interface, member: member, destination: destination, body: body)
    }

    /// The method return for `call`.
    public static func methodReturn(to call: DBusMessage, body: [DBusValue] = []) -> DBusMessage {
        DBusMessage(kind: .methodReturn, replySerial: call.serial, destination: call.sender, body: body)
    }

    /// The error reply for `call`.
    public static func errorReply(to call: DBusMessage, name: String, text: String) -> DBusMessage {
        DBusMessage(kind: .error, errorName: name, replySerial: call.serial, destination: call.sender, body: [.string(text)])
    }

    /// The wire bytes (little-endian, protocol version 1), with `serial`.
    public func encoded(serial: UInt32) -> [UInt8] {
        var body = DBusWriter()
        for v in self.body ?? [] { body.value(v) }
        var w = DBusWriter()
        w.bytes = [UInt8(ascii: "l"), kind.rawValue, flags, 1]
        w.u32(UInt32(body.bytes.count))
        w.u32(serial)
        w.u32(0)  // fields array length, patched below
        let fieldsStart = w.bytes.count
        func field(_ code: UInt8, _ v: DBusValue?) {
            guard let v else { return }
            w.pad(to: 8)
            w.u8(code)
            w.variant(v)
        }
        field(1, path.map(DBusValue.objectPath))
        field(2, interface.map(DBusValue.string))
        field(3, member.map(DBusValue.string))
        field(4, errorName.map(DBusValue.string))
        field(5, replySerial.map(DBusValue.uint32))
        field(6, destination.map(DBusValue.string))
        field(7, sender.map(DBusValue.string))
        let sig = String((self.body ?? []).map(\.typeCode))
        field(8, sig.isEmpty ? nil : .signature(sig))
        let fieldsLength = UInt32(w.bytes.count - fieldsStart)
        for i in 0..<4 { w.bytes[12 + i] = UInt8((fieldsLength >> (8 * UInt32(i))) & 0xFF) }
        w.pad(to: 8)
        return w.bytes + body.bytes
    }

    /// The whole message's length from its first 16 bytes; nil when fewer are there.
    /// Throws for a bad endianness mark or a length over ``maxMessageBytes``.
    public static func frameLength(_ bytes: ArraySlice<UInt8>) throws(DBusProtocolError) -> Int? {
        guard bytes.count >= 16 else { return nil }
        let head = Array(bytes.prefix(16))
        let big: Bool
        switch head[0] {
        case UInt8(ascii: "l"): big = false
        case UInt8(ascii: "B"): big = true
        default: throw .malformed("header: endianness mark 0x\(String(head[0], radix: 16))")
        }
        var r = DBusReader(head, position: 4, bigEndian: big)
        let bodyLength = Int(try r.u32("body length"))
        _ = try r.u32("serial")
        let fieldsLength = Int(try r.u32("header fields length"))
        guard bodyLength <= maxMessageBytes, fieldsLength <= maxMessageBytes else {
            throw .tooLong("body \(bodyLength) / header fields \(fieldsLength) bytes, at most \(maxMessageBytes)")
        }
        let header = (16 + fieldsLength + 7) & ~7
        let total = header + bodyLength
        guard total <= maxMessageBytes else { throw .tooLong("message of \(total) bytes, at most \(maxMessageBytes)") }
        return total
    }

    /// Parses one whole message (exactly `bytes`, as framed by ``frameLength(_:)``).
    public init(parsing bytes: [UInt8]) throws(DBusProtocolError) {
        guard let total = try Self.frameLength(bytes[...]) else { throw .truncated("header (\(bytes.count) bytes)") }
        guard total == bytes.count else {
            throw total > bytes.count ? .truncated("message (\(bytes.count) of \(total) bytes)") : .malformed("message: \(bytes.count - total) trailing bytes")
        }
        let big = bytes[0] == UInt8(ascii: "B")
        guard let kind = Kind(rawValue: bytes[1]) else { throw .malformed("header: message type \(bytes[1])") }
        guard bytes[3] == 1 else { throw .malformed("header: protocol version \(bytes[3])") }
        var r = DBusReader(bytes, position: 4, bigEndian: big)
        let bodyLength = Int(try r.u32("body length"))
        let serial = try r.u32("serial")
        guard serial != 0 else { throw .malformed("header: serial 0") }
        let fieldsLength = Int(try r.u32("header fields length"))
        let fieldsEnd = 16 + fieldsLength
        self.init(kind: kind, flags: bytes[2], serial: serial)
        var sig = ""
        while r.position < fieldsEnd {
            try r.align(8, "header field")
            guard r.position < fieldsEnd else { break }
            let code = try r.u8("header field code")
            let v = try r.variant("header field \(code)")
            guard r.position <= fieldsEnd else { throw .malformed("header field \(code) runs past the fields array") }
            switch (code, v) {
            case (1, .objectPath(let s)): path = s
            case (2, .string(let s)): interface = s
            case (3, .string(let s)): member = s
            case (4, .string(let s)): errorName = s
            case (5, .uint32(let n)): replySerial = n
            case (6, .string(let s)): destination = s
            case (7, .string(let s)): sender = s
            case (8, .signature(let s)): sig = s
            case (1...8, _): throw .malformed("header field \(code) of the wrong type")
            default: break  // unknown fields (UNIX_FDS…) are ignored
            }
        }
        guard r.position == fieldsEnd else { throw .malformed("header fields array length") }
        let bodyStart = (fieldsEnd + 7) & ~7
        guard bodyStart + bodyLength == bytes.count else { throw .malformed("body length") }
        signature = sig
        var b = DBusReader(bytes, position: bodyStart, base: bodyStart, bigEndian: big)
        var values: [DBusValue]? = []
        for code in sig {
            guard "ybnqiusog".contains(code) else {
                values = nil  // containers: keep only the signature
                break
            }
            values!.append(try b.value(code, "body"))
        }
        if values != nil, b.position != bytes.count { throw .malformed("body: \(bytes.count - b.position) bytes beyond signature '\(sig)'") }
        body = values
        switch kind {
        case .methodCall where path == nil || member == nil: throw .malformed("method call without path or member")
        case .signal where path == nil || member == nil || interface == nil: throw .malformed("signal without path, interface or member")
        case .methodReturn where replySerial == nil: throw .malformed("method return without reply serial")
        case .error where replySerial == nil || errorName == nil: throw .malformed("error without reply serial or name")
        default: break
        }
    }
}
