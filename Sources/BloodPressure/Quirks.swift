// SPDX-License-Identifier: GPL-2.0-or-later

/// Device-specific deviations from the Blood Pressure Service, one profile per device family.
///
/// A profile is forced by the user (`--quirk NAME`) or matched from what the device says about
/// itself: its advertised or GATT name, its model number (Device Information 0x2A24), its
/// advertised manufacturer data. Match strings are specific (a model code, a brand), so a
/// strict-standard cuff gets no profile. The facts behind each profile are in
/// `shared/spec/other-cuffs.md` and in ``evidence``.
public struct QuirkProfile: Sendable, Hashable {
    /// Deviations of the value layout: what the decoder (and the simulator's encoder) change.
    /// Stored with each record (the store's `quirks` column), so the raw bytes decode again alike.
    public struct Options: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        @inlinable public init(rawValue: UInt8) { self.rawValue = rawValue }
        // (Computed, inlinable: a stored `static let` is a lazily initialised global, read
        // through an accessor call on every cuff-pressure value the replay's short path takes.)
        /// A User ID byte follows the pulse rate even when flags bit 3 is clear.
        @inlinable public static var userIDWithoutFlag: Options { Options(rawValue: 1) }
        /// Pulse Rate and Measurement Status are big-endian.
        @inlinable public static var bigEndianPulseAndStatus: Options { Options(rawValue: 2) }
        /// Systolic, diastolic, MAP and pulse are unsigned 16-bit integers, not SFLOAT.
        @inlinable public static var unsignedIntegerValues: Options { Options(rawValue: 4) }
        /// A mean arterial pressure of 0 means "not measured" (decoded as NaN).
        @inlinable public static var zeroMeanArterialPressureAbsent: Options { Options(rawValue: 8) }
        /// Reserved Flags and Measurement Status bits are set by the cuff: noted once as a quirk,
        /// not as the RFU warnings a strict decode gives.
        @inlinable public static var reservedBitsExpected: Options { Options(rawValue: 16) }
        /// Systolic, diastolic and MAP all NaN: the cuff's error reading (warning `error_reading`).
        @inlinable public static var allNaNIsErrorReading: Options { Options(rawValue: 32) }
        /// Measurement Status bit 15 (reserved) is set by the cuff: noted once as a quirk; other
        /// reserved Flags and Status bits are still RFU warnings (unlike ``reservedBitsExpected``).
        @inlinable public static var reservedStatusBit15Expected: Options { Options(rawValue: 64) }
    }

    /// Deviations of the session: what a client must do differently with this cuff.
    public struct Behaviour: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// Write the cuff's Date Time (0x2A08) and subscribe to its results before anything
        /// else: the cuff disconnects unless both happen within about 5 s of the link coming up.
        public static let dateTimeFirst = Behaviour(rawValue: 1)
        /// Results whose pressures are all NaN are markers, not readings: skipped (said on stderr).
        public static let skipsNaNMarkers = Behaviour(rawValue: 2)
        /// Subscribing makes the cuff send its whole memory (no RACP); the session ends once the
        /// dump is over (unless following).
        public static let dumpsMemoryOnSubscribe = Behaviour(rawValue: 4)
        /// A measurement is started by the vendor control write (``QuirkProfile/vendorStart``).
        public static let vendorStart = Behaviour(rawValue: 8)
    }

    /// A vendor characteristic and the value written to it to start a measurement.
    public struct VendorStart: Sendable, Hashable {
        public var characteristicUUID: String
        public var value: [UInt8]
    }

    public var name: String
    public var options: Options
    public var behaviour: Behaviour
    /// Substrings of the name or model number that select this profile (ASCII, any case).
    public var deviceMatches: [String]
    /// Advertised manufacturer data that selects this profile: company identifier and the
    /// bytes the data starts with.
    public var manufacturerDataMatches: [ManufacturerData]
    /// The vendor start command, for ``Behaviour/vendorStart``.
    public var vendorStart: VendorStart?
    /// What the profile changes, in a sentence (README, `cuff scan`).
    public var summary: String
    /// Where the facts come from.
    public var evidence: String

    public struct ManufacturerData: Sendable, Hashable {
        public var companyID: UInt16
        public var prefix: [UInt8]
        public init(companyID: UInt16, prefix: [UInt8]) {
            self.companyID = companyID
            self.prefix = prefix
        }
    }

    public init(
        name: String, options: Options, behaviour: Behaviour = [], deviceMatches: [String],
        manufacturerDataMatches: [ManufacturerData] = [], vendorStart: VendorStart? = nil, summary: String = "",
        evidence: String
    ) {
        self.name = name
        self.options = options
        self.behaviour = behaviour
        self.deviceMatches = deviceMatches
        self.manufacturerDataMatches = manufacturerDataMatches
        self.vendorStart = vendorStart
        self.summary = summary
        self.evidence = evidence
    }

    /// A&D UA-651BLE / UA-656BLE.
    public static let andUA651 = QuirkProfile(
        name: "and-ua651", options: [], behaviour: [.dateTimeFirst, .skipsNaNMarkers],
        deviceMatches: ["UA-651", "UA-656", "UA651", "UA656"],
        summary:
            "writes Date Time (2A08) and subscribes first, within the cuff's ~5 s; skips the all-NaN marker records sent before the buffer; the disconnect after the buffer ends the session",
        evidence:
            "derdilla/blood-pressure-monitor-fl #724, A&D gateway scripts, blessed-bluez issues (shared/spec/other-cuffs.md)"
    )

    /// Hartmann Veroval compact+ BPU 26.
    public static let veroval = QuirkProfile(
        name: "veroval", options: [.zeroMeanArterialPressureAbsent, .reservedStatusBit15Expected],
        behaviour: [.dumpsMemoryOnSubscribe],
        deviceMatches: ["Veroval", "BPU 26", "BPU26"],
        manufacturerDataMatches: [ManufacturerData(companyID: 0x0ABF, prefix: [0x01, 0x02])],
        summary:
            "MAP 0 means absent (mean_arterial_pressure null); status bit 15 tolerated; the memory dump on subscription (newest first, both users, no RACP) ends the session",
        evidence: "bakroistvan/ha_veroval_ble docs/protocol.md (shared/spec/other-cuffs.md)")

    /// SilverCrest SBM69 (Lidl).
    public static let sbm69 = QuirkProfile(
        name: "sbm69", options: [.unsignedIntegerValues],
        deviceMatches: ["SBM69", "SBM 69"],
        summary: "systolic, diastolic, MAP and pulse read as unsigned 16-bit integers, not SFLOAT",
        evidence: "ignisf/sbm69 src/sbm69/_structures.py; OpenMQTTGateway #806 (shared/spec/other-cuffs.md)")

    /// Beurer BM96.
    public static let beurerBM96 = QuirkProfile(
        name: "beurer-bm96", options: [.userIDWithoutFlag, .reservedBitsExpected],
        deviceMatches: ["BM96", "BM 96"],
        summary:
            "reserved Flags bits 6-7 and status bits tolerated; SFLOAT exponent -1 values (standard decode); a user-ID byte read without its flag",
        evidence: "Stack Overflow questions 78168365, 78176577, 78184770 (shared/spec/other-cuffs.md)")

    /// The Beurer BM85 family (BM85, BM48, BM59, ELITE900 / Sanitas relatives).
    public static let beurerBM85 = QuirkProfile(
        name: "beurer-bm85",
        options: [.userIDWithoutFlag, .bigEndianPulseAndStatus, .zeroMeanArterialPressureAbsent],
        deviceMatches: ["BM85", "BM48", "BM59", "ELITE900", "BM 85", "BM 48", "BM 59", "ELITE 900"],
        summary:
            "pulse and status big-endian; a user-ID byte read without its flag; MAP 0 means absent (mean_arterial_pressure null)",
        evidence: """
            Real-device frames in derdilla/blood-pressure-monitor-fl's tests (#735/#737) and a bleak user \
            script (collected in shared/spec/peers-and-user-needs.md §6): the cuff appends a user-ID byte \
            without setting flags bit 3, and sends Pulse Rate and Measurement Status big-endian, with a \
            Mean Arterial Pressure of 0 (no measured MAP); the vendor app's big-endian model list names \
            BM48, BM59, BM85 and ELITE900.
            """)

    /// boso medicus.
    public static let boso = QuirkProfile(
        name: "boso", options: [.allNaNIsErrorReading],
        deviceMatches: ["boso medicus", "boso-medicus", "bosomedicus"],
        summary:
            "an all-NaN result with status 0 is the cuff's error reading (\"Err\", \"Err CUF\"): warning error_reading, never numbers",
        evidence: "derdilla/blood-pressure-monitor-fl #80 (shared/spec/other-cuffs.md)")

    /// Medisana BU 5xx.
    public static let medisana = QuirkProfile(
        name: "medisana", options: [],
        deviceMatches: ["LS BPM", "1872B", "Medisana BU"],
        summary:
            "recognised by the names it advertises; user IDs 0 and 1 are the cuff's two user slots (kept as sent); no layout change",
        evidence:
            "bkbilly/medisanabp_ble, Rudertier/medisana_blood_pressure, jagula/home-assistant-medisana-bu572 (shared/spec/other-cuffs.md)"
    )

    /// QardioArm.
    public static let qardio = QuirkProfile(
        name: "qardio", options: [], behaviour: [.vendorStart],
        deviceMatches: ["QardioARM", "Qardio"],
        vendorStart: VendorStart(characteristicUUID: "583CB5B3-875D-40ED-9098-C39EB0C1983D", value: [0xF1, 0x01]),
        summary: "--start writes F1 01 to the vendor control characteristic 583cb5b3-875d-40ed-9098-c39eb0c1983d",
        evidence: "exedre/qcardio-cli qcardio/commands/arm.py, ptylr/LibreArm (shared/spec/other-cuffs.md)")

    public static let all: [QuirkProfile] = [
        .andUA651, .veroval, .sbm69, .beurerBM96, .beurerBM85, .boso, .medisana, .qardio,
    ]

    public static func named(_ name: String) -> QuirkProfile? {
        all.first { $0.name == name.lowercased() }
    }

    /// The first profile whose match string appears in the device name or model (case-insensitive).
    ///
    /// The first profile in ``all`` with a match string in either: the lowest profile index found
    /// in the name or in the model, each searched once for every match string at a time (through
    /// ``DeviceMatcher``: a profile copied out of ``all`` per match string and one search per
    /// string were about 20,000 instructions a session under callgrind; each session of a replay
    /// asks when it learns the name and again for the model).
    public static func matching(name: String?, model: String?) -> QuirkProfile? {
        var best = Int.max
        if let name { best = deviceMatcher.firstProfile(in: name, below: best) }
        if let model { best = deviceMatcher.firstProfile(in: model, below: best) }
        return best == Int.max ? nil : all[best]
    }

    static let deviceMatcher = DeviceMatcher(all)

    /// ``matching(name:model:)`` that remembers what it found in the last few texts: a replay's
    /// sessions to one cuff each learn the same name and model, and each asks for both (about
    /// 1,500 instructions a session under callgrind). A value: a driver hands it from one
    /// session to the next; the result is the same as ``matching(name:model:)``'s, whatever texts
    /// come.
    public struct Memo: Sendable {
        /// The texts searched, oldest first, and the profile index found in each (`Int.max` for none).
        var texts: [String] = []
        var found: [Int] = []
        static let capacity = 4

        public init() {}

        public mutating func matching(name: String?, model: String?) -> QuirkProfile? {
            var best = Int.max
            if let name { best = profile(in: name) }
            if let model { best = min(best, profile(in: model)) }
            return best == Int.max ? nil : QuirkProfile.all[best]
        }

        /// ``DeviceMatcher/firstProfile(in:below:)`` with no limit, remembered.
        mutating func profile(in text: String) -> Int {
            if let i = texts.firstIndex(of: text) { return found[i] }
            let p = QuirkProfile.deviceMatcher.firstProfile(in: text, below: Int.max)
            if texts.count == Self.capacity {
                texts.removeFirst()
                found.removeFirst()
            }
            texts.append(text)
            found.append(p)
            return p
        }
    }

    /// ``all``'s match strings, folded to upper case (ASCII letters), each with its profile's
    /// index, grouped by their first byte: a text is searched once, and at each of its bytes
    /// only the strings that start with it are compared.
    struct DeviceMatcher: Sendable {
        /// The folded match strings, one after another.
        let bytes: [UInt8]
        /// Per match string, in first-byte order: its offset in `bytes`, its length, its profile.
        let entries: [Int]
        /// Per byte value b: the match strings starting with b are entries `groups[b]..<groups[b + 1]`.
        let groups: [Int]
        /// The first profile with an empty match string (one every text contains), if any.
        let matchesAnything: Int?

        init(_ profiles: [QuirkProfile]) {
            var folded: [(needle: [UInt8], profile: Int)] = []
            var matchesAnything: Int?
            for (i, p) in profiles.enumerated() {
                if matchesAnything == nil, p.deviceMatches.contains("") { matchesAnything = i }
                for m in p.deviceMatches where !m.isEmpty { folded.append((m.utf8.map(DeviceMatcher.fold), i)) }
            }
            var bytes: [UInt8] = []
            var entries: [Int] = []
            var groups = [Int](repeating: 0, count: 257)
            for b in 0..<256 {
                groups[b] = entries.count / 3
                for f in folded where f.needle[0] == UInt8(b) {
                    entries += [bytes.count, f.needle.count, f.profile]
                    bytes += f.needle
                }
            }
            groups[256] = entries.count / 3
            self.bytes = bytes
            self.entries = entries
            self.groups = groups
            self.matchesAnything = matchesAnything
        }

        @inline(__always) static func fold(_ b: UInt8) -> UInt8 { b >= 0x61 && b <= 0x7A ? b - 0x20 : b }

        /// The lowest profile index below `limit` with a match string in `text` (`limit` if none).
        func firstProfile(in text: String, below limit: Int) -> Int {
            var text = text  // withUTF8 makes it native (no copy when it already is)
            return text.withUTF8 { h in
                bytes.withUnsafeBufferPointer { needles in
                    entries.withUnsafeBufferPointer { e in
                        groups.withUnsafeBufferPointer { g in
                            var best = min(limit, matchesAnything ?? limit)
                            for start in 0..<h.count {
                                let first = Int(DeviceMatcher.fold(h[start]))
                                for k in g[first]..<g[first + 1] where e[3 * k + 2] < best {
                                    let at = e[3 * k], n = e[3 * k + 1]
                                    guard n <= h.count - start else { continue }
                                    var i = 1
                                    while i < n && DeviceMatcher.fold(h[start + i]) == needles[at + i] { i += 1 }
                                    if i == n, QuirkProfile.standsAlone(h, start, n) { best = e[3 * k + 2] }
                                }
                            }
                            return best
                        }
                    }
                }
            }
        }
    }

    /// The profile for an advertisement: its name, else its manufacturer data.
    public static func matching(name: String?, manufacturerData: [(companyID: UInt16, data: [UInt8])]) -> QuirkProfile?
    {
        if let p = matching(name: name, model: nil) { return p }
        for p in all {
            for m in p.manufacturerDataMatches {
                if manufacturerData.contains(where: { $0.companyID == m.companyID && $0.data.starts(with: m.prefix) }) {
                    return p
                }
            }
        }
        return nil
    }

    /// A match string found at `start` (`count` bytes) counts only as a word of its own: not
    /// right after a letter or digit, and not followed by a digit ("BM850", "xBM85", "SBM690" or
    /// the hex of an Omron `BLESmart_…` name are other devices; "UA-651BLE" is an A&D UA-651).
    @inline(__always) static func standsAlone(_ h: UnsafeBufferPointer<UInt8>, _ start: Int, _ count: Int) -> Bool {
        func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
        func isAlphanumeric(_ b: UInt8) -> Bool { isDigit(b) || (b | 0x20 >= 0x61 && b | 0x20 <= 0x7A) }
        if start > 0, isAlphanumeric(h[start - 1]) { return false }
        let end = start + count
        return end == h.count || !isDigit(h[end])
    }

    /// True when `needle` occurs in `haystack`, comparing ASCII letters without case (match
    /// strings are ASCII; other bytes compare exactly), as a word of its own (``standsAlone(_:_:_:)``).
    static func containsIgnoringASCIICase(_ haystack: String, _ needle: String) -> Bool {
        func fold(_ b: UInt8) -> UInt8 { b >= 0x61 && b <= 0x7A ? b - 0x20 : b }
        func search(_ h: UnsafeBufferPointer<UInt8>, _ n: UnsafeBufferPointer<UInt8>) -> Bool {
            guard !n.isEmpty else { return true }
            guard h.count >= n.count else { return false }
            let first = n[0] | 0x20  // equal bytes, or a letter in the other case, agree here
            for start in 0...(h.count - n.count) where h[start] | 0x20 == first {
                var i = 0
                while i < n.count && fold(h[start + i]) == fold(n[i]) { i += 1 }
                if i == n.count, standsAlone(h, start, n.count) { return true }
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
