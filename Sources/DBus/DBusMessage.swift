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
    /// Containers nested deeper than the D-Bus limits (``DBusMessage/maxNesting`` in a value,
    /// 32 arrays or 32 structs in a signature): refused before the parser recurses further.
    case nestedTooDeep(String)
    /// The SASL handshake failed (the server's line, sanitised).
    case authentication(String)

    public var description: String {
        switch self {
        case .truncated(let s): "D-Bus: truncated \(s)"
        case .tooLong(let s): "D-Bus: too long: \(s)"
        case .malformed(let s): "D-Bus: malformed \(s)"
        case .unsupported(let s): "D-Bus: unsupported \(s)"
        case .nestedTooDeep(let s): "D-Bus: nested too deep: \(s)"
        case .authentication(let s): "D-Bus: authentication failed: \(s)"
        }
    }
}

/// A D-Bus value: the basic types, and the containers bluetoothd's object tree needs (arrays,
/// structs, dict entries, variants).
public indirect enum DBusValue: Sendable, Equatable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    /// A variant: the value carries its own signature.
    case variant(DBusValue)
    /// An array of elements of one type, given by its signature (so empty arrays have a type).
    case array(element: String, [DBusValue])
    case structure([DBusValue])
    /// One `{key value}` entry of a dictionary (`a{..}`).
    case dictEntry(DBusValue, DBusValue)

    /// The one-character type code of a basic value ('v', 'a', '(' or '{' for containers).
    public var typeCode: Character { signature.first! }

    /// This value's complete type signature.
    public var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .variant: "v"
        case .array(let element, _): "a" + element
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .dictEntry(let k, let v): "{" + k.signature + v.signature + "}"
        }
    }

    /// A dictionary `a{sv}` from pairs.
    public static func dictionary(_ pairs: [(String, DBusValue)]) -> DBusValue {
        .array(element: "{sv}", pairs.map { .dictEntry(.string($0.0), .variant($0.1)) })
    }

    /// The entries of an `a{..}` value, keyed by string or object path; nil for anything else.
    public var entries: [(String, DBusValue)]? {
        guard case .array(_, let items) = self else { return nil }
        var out: [(String, DBusValue)] = []
        for item in items {
            guard case .dictEntry(let k, let v) = item else { return nil }
            switch k {
            case .string(let key), .objectPath(let key): out.append((key, v))
            default: return nil
            }
        }
        return out
    }

    /// The value inside a variant (or the value itself). One level only: a property's `v` holds
    /// its value directly, and a variant inside it is a value of another type, not that value.
    public var unwrapped: DBusValue {
        if case .variant(let v) = self { return v }
        return self
    }

    /// Lookup in an `a{sv}` / `a{s..}`: the entry's value, variants unwrapped.
    public subscript(key: String) -> DBusValue? {
        entries?.first { $0.0 == key }?.1.unwrapped
    }

    public var stringValue: String? {
        switch unwrapped {
        case .string(let s), .objectPath(let s): s
        default: nil
        }
    }

    public var boolValue: Bool? {
        if case .boolean(let b) = unwrapped { return b }
        return nil
    }

    /// `ay` as bytes.
    public var bytesValue: [UInt8]? {
        guard case .array("y", let items) = unwrapped else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(items.count)
        for i in items {
            guard case .byte(let b) = i else { return nil }
            out.append(b)
        }
        return out
    }

    /// `as` as strings.
    public var stringsValue: [String]? {
        guard case .array("s", let items) = unwrapped else { return nil }
        return items.compactMap { if case .string(let s) = $0 { s } else { nil } }
    }

    /// `ay` from bytes.
    public static func bytes(_ b: [UInt8]) -> DBusValue { .array(element: "y", b.map(DBusValue.byte)) }
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

    mutating func u64(_ v: UInt64) {
        pad(to: 8)
        for i in 0..<8 { bytes.append(UInt8((v >> (8 * UInt64(i))) & 0xFF)) }
    }

    mutating func value(_ v: DBusValue) {
        switch v {
        case .byte(let b): u8(b)
        case .boolean(let b): u32(b ? 1 : 0)
        case .int16(let n): u16(UInt16(bitPattern: n))
        case .uint16(let n): u16(n)
        case .int32(let n): u32(UInt32(bitPattern: n))
        case .uint32(let n): u32(n)
        case .int64(let n): u64(UInt64(bitPattern: n))
        case .uint64(let n): u64(n)
        case .double(let d): u64(d.bitPattern)
        case .string(let s), .objectPath(let s): string(s)
        case .signature(let s): signature(s)
        case .variant(let inner): variant(inner)
        case .array(let element, let items):
            u32(0)
            let lengthAt = bytes.count - 4
            pad(to: DBusSignature.alignment(of: element))
            let start = bytes.count
            for i in items { value(i) }
            let n = UInt32(bytes.count - start)
            for i in 0..<4 { bytes[lengthAt + i] = UInt8((n >> (8 * UInt32(i))) & 0xFF) }
        case .structure(let fields):
            pad(to: 8)
            for f in fields { value(f) }
        case .dictEntry(let k, let v):
            pad(to: 8)
            value(k)
            value(v)
        }
    }

    mutating func variant(_ v: DBusValue) {
        signature(v.signature)
        value(v)
    }
}

/// Signature helpers: complete types and alignments.
enum DBusSignature {
    static func alignment(of type: some StringProtocol) -> Int {
        switch type.first {
        case "y", "g", "v": 1
        case "n", "q": 2
        case "b", "i", "u", "s", "o", "a": 4
        case "x", "t", "d", "(", "{": 8
        default: 1
        }
    }

    /// Most arrays, and most structs, one signature may nest (D-Bus specification, "Valid Signatures").
    static let maxNesting = 32

    /// Splits off the first complete type of `sig`. Iterative over array prefixes, so a hostile
    /// signature cannot make it recurse.
    static func firstComplete(_ sig: Substring) throws(DBusProtocolError) -> (Substring, Substring) {
        var arrays = 0
        var i = sig.startIndex
        while i < sig.endIndex, sig[i] == "a" {
            arrays += 1
            guard arrays <= maxNesting else {
                throw .nestedTooDeep("signature '\(sig)': more than \(maxNesting) nested arrays")
            }
            i = sig.index(after: i)
        }
        if arrays > 0 {
            guard i < sig.endIndex else { throw .malformed("signature '\(sig)': array without an element type") }
            let (_, rest) = try firstComplete(sig[i...])  // the element: not an array, so no deeper recursion
            return (sig[sig.startIndex..<rest.startIndex], rest)
        }
        guard let c = sig.first else { throw .malformed("signature: empty where a type was expected") }
        switch c {
        case "(", "{":
            let close: Character = c == "(" ? ")" : "}"
            var depth = 0
            var i = sig.startIndex
            while i < sig.endIndex {
                let ch = sig[i]
                if ch == "(" || ch == "{" { depth += 1 }
                if ch == ")" || ch == "}" {
                    depth -= 1
                    if depth == 0 {
                        guard ch == close else { throw .malformed("signature \(sig): mismatched brackets") }
                        // An empty struct takes no bytes: an array of them would never end.
                        guard sig.index(after: sig.startIndex) != i else {
                            throw .malformed("signature \(sig): empty struct or dict entry")
                        }
                        let end = sig.index(after: i)
                        return (sig[sig.startIndex..<end], sig[end...])
                    }
                }
                guard depth <= maxNesting else {
                    throw .nestedTooDeep("signature '\(sig)': more than \(maxNesting) nested structs or dict entries")
                }
                i = sig.index(after: i)
            }
            throw .malformed("signature \(sig): unclosed bracket")
        case "y", "b", "n", "q", "i", "u", "x", "t", "d", "s", "o", "g", "v":
            let end = sig.index(after: sig.startIndex)
            return (sig[sig.startIndex..<end], sig[end...])
        default:
            throw .unsupported("type '\(c)'")
        }
    }

    /// The complete types of `sig`, in order.
    static func split(_ sig: String) throws(DBusProtocolError) -> [Substring] {
        var rest = sig[...]
        var out: [Substring] = []
        while !rest.isEmpty {
            let (t, r) = try firstComplete(rest)
            out.append(t)
            rest = r
        }
        return out
    }
}

/// Reads D-Bus wire format of either byte order, bounds-checked; alignment relative to `base`.
struct DBusReader {
    let bytes: [UInt8]
    var position: Int
    let base: Int
    let bigEndian: Bool
    /// Values that may still be read: one per byte of the message, and 1,024 more. A value is a
    /// node in memory (tens of bytes) while on the wire a struct takes none: a 1 MiB signal of
    /// arrays of nested structs, within every limit of the specification and relayed by
    /// dbus-daemon, made 4 million of them, 355 MB to parse (probe T; a few queued together ran
    /// the process out of memory). What bluetoothd sends stays well under one value per byte.
    var valuesLeft: Int

    init(_ bytes: [UInt8], position: Int = 0, base: Int = 0, bigEndian: Bool) {
        self.bytes = bytes
        self.position = position
        self.base = base
        self.bigEndian = bigEndian
        valuesLeft = bytes.count + 1024
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

    /// An unsigned integer of `T`'s width, aligned to it, in the message's byte order.
    private mutating func unsigned<T: FixedWidthInteger & UnsignedInteger>(_ what: String) throws(DBusProtocolError)
        -> T
    {
        let n = MemoryLayout<T>.size
        try align(n, what)
        let s = try take(n, what)
        var v: T = 0
        for i in 0..<n {
            v = v << 8 | T(s[s.startIndex + (bigEndian ? i : n - 1 - i)])
        }
        return v
    }

    mutating func u16(_ what: String) throws(DBusProtocolError) -> UInt16 { try unsigned(what) }

    mutating func u32(_ what: String) throws(DBusProtocolError) -> UInt32 { try unsigned(what) }

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

    mutating func u64(_ what: String) throws(DBusProtocolError) -> UInt64 { try unsigned(what) }

    mutating func value(_ code: Character, _ what: String) throws(DBusProtocolError) -> DBusValue {
        try value(type: Substring(String(code)), what, depth: 0)
    }

    /// One value of the complete type `type`; `depth` (containers around it: arrays, structs,
    /// dict entries, variants) is bounded by ``DBusMessage/maxNesting``, so hostile input cannot
    /// make the parser recurse without limit.
    mutating func value(type: Substring, _ what: String, depth: Int) throws(DBusProtocolError) -> DBusValue {
        guard depth <= DBusMessage.maxNesting else {
            throw .nestedTooDeep("\(what) at byte \(position): containers nested deeper than \(DBusMessage.maxNesting)")
        }
        guard let code = type.first else { throw .malformed("\(what): empty type") }
        valuesLeft -= 1
        guard valuesLeft >= 0 else {
            throw .tooLong("\(what) at byte \(position): more values than the message's \(bytes.count) bytes allow")
        }
        switch code {
        case "y": return .byte(try u8(what))
        case "b":
            switch try u32(what) {
            case 0: return .boolean(false)
            case 1: return .boolean(true)
            default: throw .malformed("\(what): boolean not 0 or 1")
            }
        case "n": return .int16(Int16(bitPattern: try u16(what)))
        case "q": return .uint16(try u16(what))
        case "i": return .int32(Int32(bitPattern: try u32(what)))
        case "u": return .uint32(try u32(what))
        case "x": return .int64(Int64(bitPattern: try u64(what)))
        case "t": return .uint64(try u64(what))
        case "d": return .double(Double(bitPattern: try u64(what)))
        case "s": return .string(try string(what))
        case "o": return .objectPath(try string(what))
        case "g": return .signature(try signature(what))
        case "v":
            let sig = try signature("\(what) variant signature")
            let (inner, rest) = try DBusSignature.firstComplete(sig[...])
            guard rest.isEmpty else { throw .malformed("\(what): variant signature '\(sig)' is not one type") }
            return .variant(try value(type: inner, what, depth: depth + 1))
        case "a":
            let element = type.dropFirst()
            let n = Int(try u32("\(what) array length"))
            guard n <= 1 << 26 else { throw .tooLong("\(what): array of \(n) bytes") }
            try align(DBusSignature.alignment(of: element), what)
            let end = position + n
            guard end <= bytes.count else { throw .truncated("\(what): array of \(n) bytes, \(remaining) left") }
            var items: [DBusValue] = []
            while position < end {
                items.append(try value(type: element, what, depth: depth + 1))
            }
            guard position == end else { throw .malformed("\(what): array elements overrun its length") }
            return .array(element: String(element), items)
        case "(":
            try align(8, what)
            var fields: [DBusValue] = []
            var rest = type.dropFirst().dropLast()
            while !rest.isEmpty {
                let (t, r) = try DBusSignature.firstComplete(rest)
                fields.append(try value(type: t, what, depth: depth + 1))
                rest = r
            }
            return .structure(fields)
        case "{":
            try align(8, what)
            let inner = type.dropFirst().dropLast()
            let (k, r) = try DBusSignature.firstComplete(inner)
            let (v, end) = try DBusSignature.firstComplete(r)
            guard end.isEmpty else { throw .malformed("\(what): dict entry type \(type)") }
            let key = try value(type: k, what, depth: depth + 1)
            return .dictEntry(key, try value(type: v, what, depth: depth + 1))
        default:
            throw .unsupported("type '\(code)' in \(what)")
        }
    }

    mutating func variant(_ what: String) throws(DBusProtocolError) -> DBusValue {
        let v = try value(type: "v", what, depth: 0)
        if case .variant(let inner) = v { return inner }
        return v
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
    /// Deepest container nesting in a value (arrays, structs, dict entries and variants counted
    /// together): 64, the limit libdbus (and so dbus-daemon) enforces, so whatever the bus
    /// delivers parses, and nothing deeper makes the parser recurse.
    public static let maxNesting = 64

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
    /// The body's values (nil when the body could not be decoded; `signature` still says what
    /// was announced and `bodyError` why). A whole, well-framed message with an unreadable body
    /// is still a message: the reader decides what it means, and the next message is unaffected.
    public var body: [DBusValue]?
    /// Why `body` is nil: a type we don't decode, nesting beyond the limits, a malformed value.
    public var bodyError: DBusProtocolError?
    /// The body signature as received (or as derived from `body` when encoding).
    public var signature: String

    public init(
        kind: Kind, flags: UInt8 = 0, serial: UInt32 = 0, path: String? = nil, interface: String? = nil,
        member: String? = nil,
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
        self.signature = body.map(\.signature).joined()
    }

    /// A method call.
    public static func call(
        destination: String, path: String, interface: String, member: String, body: [DBusValue] = []
    ) -> DBusMessage {
        DBusMessage(
            kind: .methodCall, path: path, interface: interface, member: member, destination: destination, body: body)
    }

    /// The method return for `call`.
    public static func methodReturn(to call: DBusMessage, body: [DBusValue] = []) -> DBusMessage {
        DBusMessage(kind: .methodReturn, replySerial: call.serial, destination: call.sender, body: body)
    }

    /// The error reply for `call`.
    public static func errorReply(to call: DBusMessage, name: String, text: String) -> DBusMessage {
        DBusMessage(
            kind: .error, errorName: name, replySerial: call.serial, destination: call.sender, body: [.string(text)])
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
        let sig = (self.body ?? []).map(\.signature).joined()
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
            throw total > bytes.count
                ? .truncated("message (\(bytes.count) of \(total) bytes)")
                : .malformed("message: \(bytes.count - total) trailing bytes")
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
        do throws(DBusProtocolError) {
            var b = DBusReader(bytes, position: bodyStart, base: bodyStart, bigEndian: big)
            var values: [DBusValue] = []
            for type in try DBusSignature.split(sig) {
                values.append(try b.value(type: type, "body", depth: 0))
            }
            if b.position != bytes.count {
                throw .malformed("body: \(bytes.count - b.position) bytes beyond signature '\(sig)'")
            }
            body = values
        } catch {
            body = nil
            bodyError = error
        }
        switch kind {
        case .methodCall where path == nil || member == nil: throw .malformed("method call without path or member")
        case .signal where path == nil || member == nil || interface == nil:
            throw .malformed("signal without path, interface or member")
        case .methodReturn where replySerial == nil: throw .malformed("method return without reply serial")
        case .error where replySerial == nil || errorName == nil: throw .malformed("error without reply serial or name")
        default: break
        }
    }
}
