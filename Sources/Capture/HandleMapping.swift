// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore

/// `--handle HANDLE=UUID`: a value handle of a capture without service discovery, and the
/// characteristic it carries (`cuff replay`, `cuff simulate --from-capture`).
public struct HandleMapping: Sendable, Hashable {
    public var handle: UInt16
    public var characteristic: CuffCharacteristic

    public init(handle: UInt16, characteristic: CuffCharacteristic) {
        self.handle = handle
        self.characteristic = characteristic
    }

    /// Why a `--handle` text was refused (``description`` says it for the user).
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        /// What was wrong: a struct, not an enum, so a new code is not a breaking change.
        public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
            public var rawValue: String
            public init(rawValue: String) { self.rawValue = rawValue }
            public var description: String { rawValue }

            /// Not `HANDLE=UUID`.
            public static let notAPair = Code(rawValue: "not_a_pair")
            /// The handle is not hex, or is 0.
            public static let badHandle = Code(rawValue: "bad_handle")
            /// The UUID is none of the characteristics cuff knows.
            public static let unknownCharacteristic = Code(rawValue: "unknown_characteristic")
        }
        public var code: Code
        public var description: String
    }

    /// Parses `HANDLE=UUID`: a hex handle (0x optional, above 0) and a 16-bit UUID, its 128-bit
    /// Base-UUID form, or cuff's own control point's UUID.
    public init(parsing s: String) throws(ParseError) {
        let parts = s.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2 else {
            throw ParseError(code: .notAPair, description: "--handle takes HANDLE=UUID, e.g. 0x0012=2a35; got '\(s)'")
        }
        var h = Substring(parts[0])
        if h.hasPrefix("0x") || h.hasPrefix("0X") { h = h.dropFirst(2) }
        guard let handle = UInt16(h, radix: 16), handle > 0 else {
            throw ParseError(
                code: .badHandle, description: "--handle: '\(parts[0])' is not an attribute handle (hex, 0x0001–0xFFFF)"
            )
        }
        var u = Substring(parts[1].lowercased())
        if u.hasPrefix("0x") { u = u.dropFirst(2) }
        let c: CuffCharacteristic?
        if let v = UInt16(u, radix: 16), u.count == 4 {
            c = CuffCharacteristic(uuid16: v)
        } else if let full = Self.uuid16(of: String(u)) {
            c = CuffCharacteristic(uuid16: full)
        } else {
            c = String(u) == CuffControl.controlPointUUID.lowercased() ? .cuffControl : nil
        }
        guard let c else {
            let known = CuffCharacteristic.allCases.compactMap { $0.uuid16.map { Hex.digits($0, 4, uppercase: false) } }
            throw ParseError(
                code: .unknownCharacteristic,
                description:
                    "--handle: '\(parts[1])' is not a characteristic cuff knows (\(known.joined(separator: " ")))")
        }
        self.init(handle: handle, characteristic: c)
    }

    /// The 16-bit alias of a 128-bit Base-UUID text (with or without dashes).
    public static func uuid16(of s: String) -> UInt16? {
        let hex = s.filter { $0 != "-" }
        guard hex.count == 32, hex.hasPrefix("0000"), hex.hasSuffix("00001000800000805f9b34fb") else { return nil }
        return UInt16(hex.dropFirst(4).prefix(4), radix: 16)
    }

    /// Mappings as the overrides a replay takes (a handle given twice: the last wins).
    public static func overrides(_ mappings: [HandleMapping]) -> [UInt16: CuffCharacteristic] {
        Dictionary(mappings.map { ($0.handle, $0.characteristic) }, uniquingKeysWith: { _, b in b })
    }
}
