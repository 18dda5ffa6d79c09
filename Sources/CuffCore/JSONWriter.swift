// SPDX-License-Identifier: GPL-2.0-or-later

/// Where a JSON shape is written to: a ``JSON`` tree (``JSON/Builder``) or bytes (the NDJSON
/// line writer of the Sinks target).
///
/// Every record's shape (its keys, their order, how each value is written) is one function,
/// generic over the writer; the tree and the bytes both come from it, so they cannot disagree.
/// Commas are the writer's business: a shape only opens, names and closes.
public protocol JSONWriter {
    mutating func beginObject()
    mutating func endObject()
    mutating func beginArray()
    mutating func endArray()
    /// An object's key: a constant of ours (written as is, never escaped).
    mutating func key(_ k: StaticString)
    /// An object's key that is not a constant (a tree's key).
    mutating func dynamicKey(_ k: String)
    mutating func null()
    mutating func bool(_ b: Bool)
    mutating func int(_ i: Int64)
    /// A finite number, as ``JSON/double(_:)`` prints it (a non-finite one becomes `null`).
    mutating func double(_ d: Double)
    /// `d`, which is exactly `mantissa × 10^exponent` (an SFLOAT): writers may format it from the
    /// decimal parts, with the same text as ``double(_:)``.
    mutating func decimal(_ d: Double, mantissa: Int, exponent: Int)
    mutating func string(_ s: String)
    /// A string value that is a constant of ours (a record's type, an enum's name): like a key,
    /// written as it is, never escaped (it holds nothing JSON escapes).
    mutating func constant(_ s: StaticString)
    /// `bytes` as a string of lowercase hex digits (``Hex/encode(_:)``).
    mutating func hex(_ bytes: [UInt8])
    /// Microseconds since 1970-01-01T00:00:00Z as a string; `format` gives the text (writers that
    /// cache the date part may write it themselves, with the same text).
    mutating func timestamp(wallMicros: Int64, _ format: (Int64) -> String)
    /// A string value made of printable ASCII that JSON does not escape (the caller's promise: a
    /// formatted date, digits and separators), written as it is.
    mutating func plainText(_ utf8: UnsafeBufferPointer<UInt8>)
    /// A value held as a tree.
    mutating func value(_ v: JSON)
}

extension JSONWriter {
    public mutating func decimal(_ d: Double, mantissa: Int, exponent: Int) { double(d) }
    public mutating func hex(_ bytes: [UInt8]) { string(Hex.encode(bytes)) }
    public mutating func constant(_ s: StaticString) { string(s.description) }
    public mutating func timestamp(wallMicros: Int64, _ format: (Int64) -> String) { string(format(wallMicros)) }
    public mutating func plainText(_ utf8: UnsafeBufferPointer<UInt8>) { string(String(decoding: utf8, as: UTF8.self)) }

    /// `value`, or `null`.
    @inlinable public mutating func optional(_ s: String?) {
        if let s { string(s) } else { null() }
    }

    public mutating func value(_ v: JSON) {
        switch v {
        case .null: null()
        case let .bool(b): bool(b)
        case let .int(i): int(i)
        case let .double(d): double(d)
        case let .string(s): string(s)
        case let .array(items):
            beginArray()
            for item in items { value(item) }
            endArray()
        case let .object(pairs):
            beginObject()
            for (k, item) in pairs {
                dynamicKey(k)
                value(item)
            }
            endObject()
        }
    }
}

extension JSON {
    /// The tree a shape writes.
    public static func build(_ body: (inout Builder) -> Void) -> JSON {
        var b = Builder()
        body(&b)
        return b.result
    }

    /// A ``JSONWriter`` that builds a ``JSON`` tree.
    public struct Builder: JSONWriter {
        enum Open {
            case object([(String, JSON)], key: String?)
            case array([JSON])
        }
        var stack: [Open] = []
        /// The finished top-level value.
        public private(set) var result: JSON = .null

        public init() {}

        mutating func add(_ v: JSON) {
            guard let top = stack.popLast() else { result = v; return }
            switch top {
            case .object(var pairs, let k):
                pairs.append((k ?? "", v))
                stack.append(.object(pairs, key: nil))
            case .array(var items):
                items.append(v)
                stack.append(.array(items))
            }
        }

        public mutating func beginObject() { stack.append(.object([], key: nil)) }
        public mutating func endObject() {
            guard case let .object(pairs, _)? = stack.popLast() else { return }
            add(.object(pairs))
        }
        public mutating func beginArray() { stack.append(.array([])) }
        public mutating func endArray() {
            guard case let .array(items)? = stack.popLast() else { return }
            add(.array(items))
        }
        public mutating func key(_ k: StaticString) { dynamicKey(k.description) }
        public mutating func dynamicKey(_ k: String) {
            guard case let .object(pairs, _)? = stack.popLast() else { return }
            stack.append(.object(pairs, key: k))
        }
        public mutating func null() { add(.null) }
        public mutating func bool(_ b: Bool) { add(.bool(b)) }
        public mutating func int(_ i: Int64) { add(.int(i)) }
        public mutating func double(_ d: Double) { add(.double(d)) }
        public mutating func string(_ s: String) { add(.string(s)) }
        public mutating func value(_ v: JSON) { add(v) }
    }
}
