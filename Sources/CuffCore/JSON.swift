// SPDX-License-Identifier: GPL-2.0-or-later

/// A JSON value whose objects keep their keys in insertion order, so output is stable and readable.
public indirect enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    /// A finite number. Non-finite doubles are written as `null`; callers never put them here.
    case double(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        case let (.double(a), .double(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// Convenience for an optional: `nil` becomes `.null`.
    @inlinable
    public static func from<T>(_ value: T?, _ transform: (T) -> JSON) -> JSON {
        value.map(transform) ?? .null
    }

    public subscript(key: String) -> JSON? {
        guard case let .object(pairs) = self else { return nil }
        return pairs.first { $0.0 == key }?.1
    }

    /// Serialises compactly (one line), or indented by two spaces with `pretty`.
    public func serialized(pretty: Bool = false) -> String {
        var out = ""
        write(into: &out, pretty: pretty, indent: 0)
        return out
    }

    private func write(into out: inout String, pretty: Bool, indent: Int) {
        switch self {
        case .null: out += "null"
        case let .bool(b): out += b ? "true" : "false"
        case let .int(i): out += String(i)
        case let .double(d): out += JSON.format(d)
        case let .string(s): JSON.escape(s, into: &out)
        case let .array(items):
            if items.isEmpty { out += "[]"; return }
            out += "["
            for (n, item) in items.enumerated() {
                if n > 0 { out += "," }
                if pretty { out += "\n" + String(repeating: "  ", count: indent + 1) }
                item.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { out += "\n" + String(repeating: "  ", count: indent) }
            out += "]"
        case let .object(pairs):
            if pairs.isEmpty { out += "{}"; return }
            out += "{"
            for (n, (k, v)) in pairs.enumerated() {
                if n > 0 { out += "," }
                if pretty { out += "\n" + String(repeating: "  ", count: indent + 1) }
                JSON.escape(k, into: &out)
                out += pretty ? ": " : ":"
                v.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { out += "\n" + String(repeating: "  ", count: indent) }
            out += "}"
        }
    }

    /// Shortest round-trip form, always with a decimal point or exponent (`127.0`, `18.9`, `1e-05`).
    static func format(_ d: Double) -> String {
        guard d.isFinite else { return "null" }
        // Swift's shortest round-trip form always has a "." or an exponent (127.0, 1e-05, 1e+20),
        // all valid JSON numbers.
        return d.description
    }

    static func escape(_ s: String, into out: inout String) { JSONEscape.quote(s, into: &out) }
}

/// Something that has a JSON form.
public protocol JSONRepresentable {
    var json: JSON { get }
}
