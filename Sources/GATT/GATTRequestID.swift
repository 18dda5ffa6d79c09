// SPDX-License-Identifier: GPL-2.0-or-later

/// A client procedure's identity, handed out when the procedure is queued.
public struct GATTRequestID: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public var description: String { "#\(rawValue)" }
}
