// SPDX-License-Identifier: GPL-2.0-or-later

/// Where a bearer goes: a Unix socket path or a Bluetooth LE device.
///
/// Text forms: `unix:/tmp/cuff.sock`; `AA:BB:CC:DD:EE:FF` (public LE address);
/// `AA:BB:CC:DD:EE:FF/random` or `/public` to give the address type.
public enum TransportAddress: Sendable, Hashable, CustomStringConvertible {
    case unix(path: String)
    case bluetooth(BluetoothAddress)

    /// Parses one of the text forms above.
    ///
    /// - Throws: ``TransportAddressError`` saying which forms are accepted.
    public init(parsing text: String) throws(TransportAddressError) {
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            guard !path.isEmpty else {
                throw TransportAddressError(text, "the path after `unix:` is empty")
            }
            guard path.utf8.count <= 107 else {
                throw TransportAddressError(text, "the socket path is \(path.utf8.count) bytes; Unix sockets allow 107")
            }
            self = .unix(path: path)
            return
        }
        var body = Substring(text)
        var type = BluetoothAddress.AddressType.public
        if let slash = body.lastIndex(of: "/") {
            switch body[body.index(after: slash)...].lowercased() {
            case "public": type = .public
            case "random": type = .random
            default: throw TransportAddressError(text, "the address type after `/` must be `public` or `random`")
            }
            body = body[..<slash]
        }
        guard let address = BluetoothAddress(body, type: type) else {
            throw TransportAddressError(text, "not `unix:PATH` nor a Bluetooth address like AA:BB:CC:DD:EE:FF[/random]")
        }
        self = .bluetooth(address)
    }

    /// The text form; parses back to the same value.
    public var description: String {
        switch self {
        case .unix(let path): "unix:\(path)"
        case .bluetooth(let a): a.type == .public ? a.description : "\(a)/random"
        }
    }
}

/// A transport address that could not be parsed.
public struct TransportAddressError: Error, Sendable, Equatable, CustomStringConvertible {
    public var text: String
    public var reason: String
    public init(_ text: String, _ reason: String) {
        self.text = text
        self.reason = reason
    }
    public var description: String { "invalid address \"\(text)\": \(reason)" }
}
