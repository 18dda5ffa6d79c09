// SPDX-License-Identifier: GPL-2.0-or-later

/// What cuff would use for a device it sees advertising (`cuff scan`): the standard service
/// with a device family's profile or without, a vendor protocol with a public description, or
/// nothing, for the families whose protocol has none (shared/spec/other-cuffs.md).
public enum CuffRecognition: Sendable, Hashable {
    /// The Blood Pressure Service as the standard says.
    case standard
    /// The Blood Pressure Service with this family's deviations.
    case profile(QuirkProfile)
    /// A vendor protocol cuff speaks (`microlife`, `yonker`).
    case vendorProtocol(String)
    /// A blood-pressure cuff whose protocol has no public description good enough to implement.
    case noPublicProtocol(vendor: String)
    /// Not a cuff cuff knows.
    case unknown

    /// The `profile` key of `cuff scan`: the profile's name, or nil.
    public var profileName: String? {
        if case let .profile(p) = self { return p.name }
        return nil
    }

    /// The `protocol` key of `cuff scan`.
    public var protocolName: String? {
        switch self {
        case .standard, .profile: "bps"
        case let .vendorProtocol(p): p
        case let .noPublicProtocol(v): "no public protocol (\(v))"
        case .unknown: nil
        }
    }

    /// A cuff, whatever cuff can do with it.
    public var isCuff: Bool { self != .unknown }

    /// Names (substrings, any case) of the families without a public protocol.
    static let withoutPublicProtocol: [(match: String, vendor: String)] = [
        ("iHealth", "iHealth"), ("BP3L", "iHealth"), ("BP5S", "iHealth"), ("BP7S", "iHealth"), ("KN-550BT", "iHealth"),
        ("Withings", "Withings"), ("BPM Connect", "Withings"), ("BPM Core", "Withings"), ("BPM Vision", "Withings"),
        ("BPX1", "Xiaomi"), ("Microlife", "Microlife (models other than BP3GY1-2N)"),
    ]
    // Xiaomi's BPX1 is known by its name only: its MiBeacon service (FE95) is on every Xiaomi
    // device (bands, scales, lamps), and no public source gives the BPX1's product id in it.

    public static func recognise(
        name: String?, serviceUUIDs16: [UInt16], serviceUUIDs128: [String],
        manufacturerData: [(companyID: UInt16, data: [UInt8])]
    ) -> CuffRecognition {
        let bps = serviceUUIDs16.contains(BPSUUID.bloodPressureService)
        if let p = QuirkProfile.matching(name: name, manufacturerData: manufacturerData) { return .profile(p) }
        if serviceUUIDs128.contains(where: { $0.uppercased() == Yonker.serviceUUID }) {
            return .vendorProtocol("yonker")
        }
        if let name {
            for m in ["YK-IBPA1", "YK-BPW5", "YK-BPA1"] where QuirkProfile.containsIgnoringASCIICase(name, m) {
                return .vendorProtocol("yonker")
            }
            if QuirkProfile.containsIgnoringASCIICase(name, "BP3GY1") { return .vendorProtocol("microlife") }
        }
        if bps { return .standard }
        if let name {
            for m in withoutPublicProtocol where QuirkProfile.containsIgnoringASCIICase(name, m.match) {
                return .noPublicProtocol(vendor: m.vendor)
            }
        }
        return .unknown
    }
}
