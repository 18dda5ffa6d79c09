// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import GATT

/// What a session learned about a cuff that does not change from one connection to the next:
/// its GATT database (services, characteristics, CCCD handles), the values it read once
/// (Device Information, Blood Pressure Feature, device name), the ATT_MTU it used and the
/// Database Hash (0x2B2A) when the cuff has one. The GATT cache: the next session to the same
/// cuff goes straight to its subscriptions and the clock (``CuffCentral``), or to the Omron
/// service's subscriptions and unlock (``OmronCentral``).
///
/// A value: the I/O edge loads it (`GATTCacheStore` in CuffRuntime), passes it in with
/// ``CuffSessionConfiguration/gattCache``, and saves what the session's
/// ``CuffProtocolSession/learned`` holds at the end.
public struct LearnedCuff: Sendable, Hashable {
    /// The device's identity: where it was reached (a Bluetooth address, `unix:PATH`).
    public var address: String
    /// The ATT_MTU the session used.
    public var mtu: UInt16
    /// The Database Hash read after discovery; nil when the cuff has none.
    public var databaseHash: [UInt8]?
    /// The database as discovery found it (descriptors other than CCCDs are not kept).
    public var profile: GATTProfile
    /// The values the session read once (``CuffSessionMachine/plannedReads``), as read.
    public var values: [CuffCharacteristic: [UInt8]]

    public init(
        address: String, mtu: UInt16, databaseHash: [UInt8]? = nil, profile: GATTProfile,
        values: [CuffCharacteristic: [UInt8]] = [:]
    ) {
        self.address = address
        self.mtu = mtu
        self.databaseHash = databaseHash
        self.profile = profile
        self.values = values
    }

    /// The serial number read from the cuff (part of its identity), when it has one.
    public var serial: String? {
        values[.serialNumber].map { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    /// The value handle of the Service Changed characteristic, when the cuff has one.
    public var serviceChangedHandle: UInt16? {
        profile.characteristic(.serviceChanged, in: .genericAttribute)?.valueHandle
    }

    // MARK: - File format

    /// The first line of a cache file (its format's version).
    public static let magic = "cuff-gatt-cache 1"

    /// The cache file's text: one fact a line, every string and value in hex (nothing to escape).
    ///
    ///     cuff-gatt-cache 1
    ///     address 756e69783a2f746d702f632e736f636b
    ///     mtu 247
    ///     hash 00112233445566778899aabbccddeeff
    ///     service 1810 0x0005 0x000D
    ///     characteristic 2A35 0x0006 0x0007 20 0x0008
    ///     value serialNumber 53494d2d303030303031
    public var encoded: String {
        var lines = [Self.magic, "address " + Hex.encode(Array(address.utf8)), "mtu \(mtu)"]
        if let databaseHash { lines.append("hash " + (databaseHash.isEmpty ? "-" : Hex.encode(databaseHash))) }
        for s in profile.services {
            lines.append("service \(s.uuid) \(Hex.handle(s.handle)) \(Hex.handle(s.endHandle))")
            for c in s.characteristics {
                lines.append(
                    "characteristic \(c.uuid) \(Hex.handle(c.declarationHandle)) \(Hex.handle(c.valueHandle)) \(c.properties.rawValue) "
                        + (c.cccdHandle.map(Hex.handle) ?? "-"))
            }
        }
        for c in CuffCharacteristic.allCases {
            guard let v = values[c] else { continue }
            lines.append("value \(c.rawValue) " + (v.isEmpty ? "-" : Hex.encode(v)))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Parses ``encoded``; throws ``LearnedCuffError`` naming the line that is wrong. A file of
    /// another format version is `.unsupportedVersion` (a cache is only ever rebuilt, never migrated).
    public init(parsing text: String) throws(LearnedCuffError) {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: true)[...]
        guard let first = lines.popFirst(), first == Self.magic else {
            throw LearnedCuffError(.unsupportedVersion, line: 1)
        }
        var address: String?
        var mtu: UInt16?
        var hash: [UInt8]?
        var services: [GATTProfile.Service] = []
        var values: [CuffCharacteristic: [UInt8]] = [:]
        func handle(_ s: Substring) -> UInt16? {
            guard s.hasPrefix("0x") else { return nil }
            return UInt16(s.dropFirst(2), radix: 16)
        }
        func bytes(_ s: Substring) -> [UInt8]? { s == "-" ? [] : Hex.decode(String(s)) }
        for (i, line) in lines.enumerated() {
            let n = i + 2
            let f = line.split(separator: " ")
            switch (f.first, f.count) {
            case ("address", 2):
                guard let b = bytes(f[1]) else { throw LearnedCuffError(.malformedLine, line: n) }
                address = String(decoding: b, as: UTF8.self)
            case ("mtu", 2):
                guard let m = UInt16(f[1]), m >= 23 else { throw LearnedCuffError(.malformedLine, line: n) }
                mtu = m
            case ("hash", 2):
                guard let b = bytes(f[1]) else { throw LearnedCuffError(.malformedLine, line: n) }
                hash = b
            case ("service", 4):
                guard let uuid = BluetoothUUID(String(f[1])), let h = handle(f[2]), let end = handle(f[3]), h <= end
                else {
                    throw LearnedCuffError(.malformedLine, line: n)
                }
                services.append(GATTProfile.Service(uuid: uuid, handle: h, endHandle: end))
            case ("characteristic", 6):
                guard !services.isEmpty, let uuid = BluetoothUUID(String(f[1])), let decl = handle(f[2]),
                    let value = handle(f[3]),
                    let props = UInt8(f[4]), value > decl, f[5] == "-" || handle(f[5]) != nil
                else { throw LearnedCuffError(.malformedLine, line: n) }
                let s = services.count - 1
                guard decl > services[s].handle, value <= services[s].endHandle else {
                    throw LearnedCuffError(.malformedLine, line: n)
                }
                services[s].characteristics.append(
                    GATTProfile.Characteristic(
                        uuid: uuid, properties: CharacteristicProperties(rawValue: props), declarationHandle: decl,
                        valueHandle: value,
                        cccdHandle: handle(f[5])))
            case ("value", 3):
                guard let c = CuffCharacteristic(rawValue: String(f[1])), let b = bytes(f[2]) else {
                    throw LearnedCuffError(.malformedLine, line: n)
                }
                values[c] = b
            default:
                throw LearnedCuffError(.malformedLine, line: n)
            }
        }
        guard let address, let mtu else { throw LearnedCuffError(.incomplete, line: lines.count + 1) }
        self.init(
            address: address, mtu: mtu, databaseHash: hash, profile: GATTProfile(services: services), values: values)
    }
}

/// Why a GATT cache file could not be used (the session then discovers, and the file is rewritten).
public struct LearnedCuffError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Not a cache file of this format (its first line).
        public static let unsupportedVersion = Code(rawValue: "unsupported_version")
        /// A line that is not one of the format's.
        public static let malformedLine = Code(rawValue: "malformed_line")
        /// The address or the MTU is missing.
        public static let incomplete = Code(rawValue: "incomplete")
    }

    public var code: Code
    /// The 1-based line the error is about.
    public var line: Int

    public init(_ code: Code, line: Int) {
        self.code = code
        self.line = line
    }

    public var description: String {
        switch code {
        case .unsupportedVersion: "line \(line): not a cuff GATT cache (expected \"\(LearnedCuff.magic)\")"
        case .malformedLine: "line \(line): malformed"
        case .incomplete: "line \(line): the address or the MTU is missing"
        default: "line \(line): \(code.rawValue)"
        }
    }
}

/// The GATT cache a session gets (``CuffSessionConfiguration/gattCache``).
public enum GATTCacheMode: Sendable, Hashable {
    /// No cache: every session discovers, nothing is learned (`--no-gatt-cache`, a replay).
    case off
    /// A cache: what is known of this cuff (nil when nothing yet); the session learns what it
    /// finds for the edge to keep.
    case on(LearnedCuff?)
}
