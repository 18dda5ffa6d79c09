// SPDX-License-Identifier: GPL-2.0-or-later

/// Device-specific deviations from the Blood Pressure Service layouts, opt-in by name.
///
/// A profile is chosen by the user (`--quirk NAME`) or from the device's name / model number
/// (Device Information 0x2A24) with ``QuirkProfile/matching(name:model:)``.
public struct QuirkProfile: Sendable, Hashable {
    public struct Options: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// A User ID byte follows the pulse rate even when flags bit 3 is clear.
        public static let userIDWithoutFlag = Options(rawValue: 1)
        /// Pulse Rate and Measurement Status are big-endian.
        public static let bigEndianPulseAndStatus = Options(rawValue: 2)
    }

    public var name: String
    public var options: Options
    /// Substrings of the advertised name or model number that select this profile.
    public var deviceMatches: [String]
    /// Why this profile exists.
    public var evidence: String

    public init(name: String, options: Options, deviceMatches: [String], evidence: String) {
        self.name = name
        self.options = options
        self.deviceMatches = deviceMatches
        self.evidence = evidence
    }

    /// The Beurer BM85 family (BM85, BM48, BM59, ELITE900 / Sanitas relatives).
    public static let beurerBM85 = QuirkProfile(
        name: "beurer-bm85",
        options: [.userIDWithoutFlag, .bigEndianPulseAndStatus],
        deviceMatches: ["BM85", "BM48", "BM59", "ELITE900"],
        evidence: """
            Real-device frames in derdilla/blood-pressure-monitor-fl's tests and a bleak user script \
            (collected in shared/spec/peers-and-user-needs.md §6): the cuff appends a user-ID byte \
            without setting flags bit 3, and sends Pulse Rate and Measurement Status big-endian.
            """)

    public static let all: [QuirkProfile] = [.beurerBM85]

    public static func named(_ name: String) -> QuirkProfile? {
        all.first { $0.name == name.lowercased() }
    }

    /// The first profile whose match string appears in the device name or model (case-insensitive).
    public static func matching(name: String?, model: String?) -> QuirkProfile? {
        // (Loops, not closures: a session asks once per name or model it learns, and the
        // closures' captures cost more than the search.)
        for p in all {
            for m in p.deviceMatches {
                if let name, containsIgnoringASCIICase(name, m) { return p }
                if let model, containsIgnoringASCIICase(model, m) { return p }
            }
        }
        return nil
    }

    /// True when `needle` occurs in `haystack`, comparing ASCII letters without case (match
    /// strings are ASCII; other bytes compare exactly).
    static func containsIgnoringASCIICase(_ haystack: String, _ needle: String) -> Bool {
        func fold(_ b: UInt8) -> UInt8 { b >= 0x61 && b <= 0x7A ? b - 0x20 : b }
        func search(_ h: UnsafeBufferPointer<UInt8>, _ n: UnsafeBufferPointer<UInt8>) -> Bool {
            guard !n.isEmpty else { return true }
            guard h.count >= n.count else { return false }
            let first = n[0] | 0x20  // equal bytes, or a letter in the other case, agree here
            for start in 0...(h.count - n.count) where h[start] | 0x20 == first {
                var i = 0
                while i < n.count && fold(h[start + i]) == fold(n[i]) { i += 1 }
                if i == n.count { return true }
            }
            return false
        }
        // In place when both are contiguous UTF-8 (native strings, small ones too), without a copy.
        if let found = haystack.utf8.withContiguousStorageIfAvailable({ hb in
            needle.utf8.withContiguousStorageIfAvailable { nb in search(hb, nb) }
        }), let found {
            return found
        }
        var h = haystack, n = needle  // withUTF8 makes them native (no copy when they already are)
        return h.withUTF8 { hb in n.withUTF8 { nb in search(hb, nb) } }
    }
}
