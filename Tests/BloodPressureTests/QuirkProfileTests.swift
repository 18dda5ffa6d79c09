import Testing
import CuffCore
@testable import BloodPressure

/// The device-family profiles (shared/spec/other-cuffs.md): what each changes in decoding, and
/// that they are chosen only for their own cuffs.
@Suite("Quirk profiles")
struct QuirkProfileTests {
    @Test func theProfilesTheIssueNames() {
        #expect(
            QuirkProfile.all.map(\.name) == [
                "and-ua651", "veroval", "sbm69", "beurer-bm96", "beurer-bm85", "boso", "medisana", "qardio",
            ])
        for p in QuirkProfile.all { #expect(QuirkProfile.named(p.name.uppercased()) == p) }
        #expect(QuirkProfile.named("omron") == nil)
    }

    @Test(arguments: [
        ("A&D_UA-651BLE_1A2B3C", "and-ua651"), ("UA-656BLE", "and-ua651"), ("Beurer BM85", "beurer-bm85"),
        ("BM 59", "beurer-bm85"), ("ELITE900", "beurer-bm85"), ("BM48", "beurer-bm85"), ("BM96", "beurer-bm96"),
        ("SBM69", "sbm69"), ("boso medicus system", "boso"), ("LS BPM", "medisana"), ("1872B", "medisana"),
        ("QardioARM", "qardio"), ("Veroval BPU 26", "veroval"),
    ])
    func namesSelectTheirProfile(name: String, profile: String) {
        #expect(QuirkProfile.matching(name: name, model: nil)?.name == profile)
        #expect(QuirkProfile.matching(name: nil, model: name)?.name == profile)
    }

    /// The matcher gives what a plain search gives: the first profile of ``QuirkProfile/all``
    /// with a match string in the name or the model, whichever of the two holds it, in any case
    /// of ASCII letters (other bytes compared exactly).
    @Test func matchingIsTheFirstProfileWithAMatchInNameOrModel() {
        func reference(_ name: String?, _ model: String?) -> String? {
            func contains(_ h: String, _ n: String) -> Bool {
                func fold(_ b: UInt8) -> UInt8 { b >= 0x61 && b <= 0x7A ? b - 0x20 : b }
                let h = Array(h.utf8).map(fold), n = Array(n.utf8).map(fold)
                guard h.count >= n.count else { return false }
                // As a word of its own: not after a letter or digit, not before a digit.
                func alnum(_ b: UInt8) -> Bool { (0x30...0x39).contains(b) || (0x41...0x5A).contains(b) }
                return (0...(h.count - n.count)).contains {
                    Array(h[$0..<($0 + n.count)]) == n && ($0 == 0 || !alnum(h[$0 - 1]))
                        && ($0 + n.count == h.count || !(0x30...0x39).contains(h[$0 + n.count]))
                }
            }
            for p in QuirkProfile.all {
                for m in p.deviceMatches {
                    if let name, contains(name, m) { return p.name }
                    if let model, contains(model, m) { return p.name }
                }
            }
            return nil
        }
        let texts: [String?] = [
            nil, "", "q", "Qardio", "qardioarm", "my BM 96 ua651", "xxBPU26", "bpu 2", "BM850", "(BM85)", "UA-651BLE",
            "BOSO-MEDICUS", "Medisana BU 5",
            "ua-65", "UA-651", "ELITE 900x", "sbm 69 veroval", "cuff-sim", "Blutdruckmessgerät BM85", "ÄBM96",
            "bm\u{00E4}96", "LS BPMQardio",
        ]
        // The memo a replay hands from session to session gives the same answers, through its
        // hits and its evictions (more texts than it keeps, each pair asked twice).
        var memo = QuirkProfile.Memo()
        for name in texts {
            for model in texts {
                #expect(
                    QuirkProfile.matching(name: name, model: model)?.name == reference(name, model),
                    "name \(name ?? "nil"), model \(model ?? "nil")")
                for _ in 0..<2 {
                    #expect(
                        memo.matching(name: name, model: model)?.name == reference(name, model),
                        "memo: name \(name ?? "nil"), model \(model ?? "nil")")
                }
            }
        }
    }

    /// Names of strict-standard cuffs (and of the simulator) select nothing.
    @Test(arguments: [
        "X4 Smart", "BLESmart_00000136D45D2F6A8E", "M7 Intelli IT", "cuff-sim", "CUFF-SIM 1", "cuff-sim-0001", "BP5250",
        "Omron EVOLV", "BPM Connect", "BM", "UA-", "medicus",
        // A match string inside another word is another device's name (was: a profile, and
        // "BM850" decoded a standard frame's pulse as -15360000).
        "BM850", "xBM85xyz", "XBM96000", "SBM690xx", "BPU 260", "UA-6510 XX", "A1872B-ST1",
        "BLESmart_000000011872B0000000",
    ])
    func strictNamesSelectNothing(name: String) {
        #expect(QuirkProfile.matching(name: name, model: name) == nil)
        #expect(QuirkProfile.matching(name: name, manufacturerData: [(0x020E, [0x01, 0x02])]) == nil)
    }

    @Test func veroValIsMatchedByItsManufacturerData() {
        #expect(QuirkProfile.matching(name: nil, manufacturerData: [(0x0ABF, [0x01, 0x02, 0x33])])?.name == "veroval")
        #expect(QuirkProfile.matching(name: nil, manufacturerData: [(0x0ABF, [0x02, 0x01])]) == nil)
        #expect(QuirkProfile.matching(name: nil, manufacturerData: []) == nil)
    }

    // MARK: Veroval: MAP 0 absent, status bit 15 tolerated

    /// A Veroval record as ha_veroval_ble's protocol notes describe it: flags 0x1E, 19 bytes,
    /// MAP 0, status bit 15 set. 123/79, 2025-12-30 08:30:39, pulse 71, user 0.
    static let veroval = bytes("1E 7B 00 4F 00 00 00 E9 07 0C 1E 08 1E 27 47 00 00 00 80")

    @Test func veroValMAPZeroIsAbsent() throws {
        let d = try BloodPressureMeasurement.decode(Self.veroval[...], quirks: QuirkProfile.veroval.options)
        #expect(d.value.systolic.doubleValue == 123)
        #expect(d.value.diastolic.doubleValue == 79)
        #expect(d.value.meanArterialPressure == .nan)
        #expect(d.value.meanArterialPressureAbsent)
        #expect(d.value.userID == 0)
        #expect(d.value.status?.rawValue == 0x8000)
        #expect(d.value.timestamp?.iso8601 == "2025-12-30T08:30:39")
        #expect(!d.warnings.contains { $0.code == .rfuStatus || $0.code == .rfuFlags })
        #expect(d.warnings.filter { $0.code == .quirkApplied }.count == 2)
        let json = d.value.json(as: .bloodPressureMeasurement, warnings: d.warnings, raw: .null)
        #expect(json.serialized().contains("\"mean_arterial_pressure\":null"))
        // Strictly decoded, the same bytes give MAP 0 and an RFU warning.
        let strict = try BloodPressureMeasurement.decode(Self.veroval[...])
        #expect(strict.value.meanArterialPressure.doubleValue == 0)
        #expect(strict.warnings.map(\.code) == [.rfuStatus])
        // The simulator's encoding gives the same bytes back.
        #expect(d.value.encode(quirks: QuirkProfile.veroval.options) == Self.veroval)
    }

    /// Only bit 15 is the Veroval's own (probe J): another reserved status bit, or a reserved
    /// Flags bit, is still an RFU warning naming that bit alone; a cuff pressure (0x2A36) has no
    /// MAP, so "MAP 0 read as absent" is not said of it.
    @Test func veroValToleratesStatusBit15Only() throws {
        var other = Self.veroval
        other[17] = 0x40  // status 0x8040
        let d = try BloodPressureMeasurement.decode(other[...], quirks: QuirkProfile.veroval.options)
        #expect(d.value.status?.rawValue == 0x8040)
        #expect(
            d.warnings.filter { $0.code == .rfuStatus }.map(\.message) == [
                "reserved Measurement Status bits set: 0x0040"
            ])
        #expect(d.warnings.contains { $0.code == .quirkApplied && $0.message.contains("bit 15") })
        var flags = Self.veroval
        flags[0] = 0x5E  // reserved Flags bit 6
        #expect(
            try BloodPressureMeasurement.decode(flags[...], quirks: QuirkProfile.veroval.options).warnings.contains {
                $0.code == .rfuFlags
            })
        // Status without bit 15: no quirk note, the standard check.
        var plain = Self.veroval
        plain[18] = 0x00
        let p = try BloodPressureMeasurement.decode(plain[...], quirks: QuirkProfile.veroval.options)
        #expect(!p.warnings.contains { $0.code == .rfuStatus || $0.message.contains("bit 15") })
        // A cuff pressure with MAP 0 (its unused slot) under the profile: no MAP note.
        let icp = try BPSCharacteristic.intermediateCuffPressure.decodeJSON(
            bytes("00 64 00 FF 07 00 00")[...], quirks: QuirkProfile.veroval.options
        ).serialized()
        #expect(!icp.contains("Mean Arterial Pressure"), "\(icp)")
    }

    /// A cuff pressure's diastolic and MAP fields are unused (NaN, 0x07FF, as the specification
    /// has them): no "rounded" note under a profile reading unsigned integers, and a NaN cuff
    /// pressure is no error reading under one that calls an all-NaN result one (probe O).
    @Test func unusedCuffPressureSlotsGetNoResultNotes() throws {
        for (hex, quirk) in [("00 64 00 FF 07 FF 07", QuirkProfile.sbm69), ("00 FF 07 FF 07 FF 07", .boso)] {
            let icp = try BPSCharacteristic.intermediateCuffPressure.decodeJSON(bytes(hex)[...], quirks: quirk.options)
            #expect(icp["warnings"] == .array([]), "\(quirk.name): \(icp.serialized())")
            // The same bytes as a result still get them.
            let bpm = try BPSCharacteristic.bloodPressureMeasurement.decodeJSON(bytes(hex)[...], quirks: quirk.options)
            #expect(bpm["warnings"] != .array([]), "\(quirk.name): \(bpm.serialized())")
        }
        let d = try BloodPressureMeasurement.decode(
            bytes("00 64 00 FF 07 FF 07")[...], quirks: QuirkProfile.sbm69.options, cuffPressure: true)
        #expect(d.value.cuffPressure.doubleValue == 100 && d.value.diastolic == .nan)
    }

    // MARK: SBM69: unsigned integers

    @Test func sbm69ValuesAreUnsignedIntegers() throws {
        // 0x0800 is NRes as SFLOAT, 2048 as the SBM69's uint16; 0x0078 is 120 either way.
        let b = bytes("04 78 00 00 08 5D 00 48 00")
        let q = try BloodPressureMeasurement.decode(b[...], quirks: QuirkProfile.sbm69.options).value
        #expect(q.systolic.doubleValue == 120)
        // (An SFLOAT holds it to 3 digits and a power of ten: 2048 reads 2050; blood pressures never come near.)
        #expect(q.diastolic.doubleValue.map { abs($0 - 2048) <= 2 } == true)
        #expect(q.meanArterialPressure.doubleValue == 93)
        #expect(q.pulseRate?.doubleValue == 72)
        // The rounding is said, with the integer and where it is; 2045 and below are exact.
        let w = try BloodPressureMeasurement.decode(b[...], quirks: QuirkProfile.sbm69.options).warnings
        #expect(w.map(\.code) == [.valueRounded, .implausibleValue] && w.first?.offset == 3, "\(w)")
        #expect(w.first?.message.contains("Diastolic 2048") == true, "\(w)")
        for (n, exact) in [(2045, true), (2046, false), (2047, false), (4095, false), (65535, false)] {
            let hi = UInt8(n >> 8), lo = UInt8(n & 0xFF)
            let d = try BloodPressureMeasurement.decode(
                [0x04, lo, hi, 0x50, 0x00, 0x5D, 0x00, lo, hi][...], quirks: QuirkProfile.sbm69.options)
            #expect(d.warnings.filter { !$0.isAboutValues }.count == (exact ? 0 : 2), "\(n): \(d.warnings)")
            // (No cuff measures such values: flagged too, systolic and pulse.)
            #expect(d.warnings.filter(\.isAboutValues).map(\.offset) == [1, 7], "\(n): \(d.warnings)")
            #expect(d.value.systolic.isSpecial == false && d.value.pulseRate?.isSpecial == false, "\(n)")
            if exact { #expect(d.value.systolic.doubleValue == Double(n)) }
        }
        let strict = try BloodPressureMeasurement.decode(b[...]).value
        #expect(strict.diastolic == .nres)
        // A plain reading decodes alike both ways (identical bytes below 2048, exponent 0).
        let plain = bytes("16 7C 00 56 00 61 00 E8 07 06 0F 11 11 1B 33 00 00 00")
        #expect(
            try BloodPressureMeasurement.decode(plain[...], quirks: QuirkProfile.sbm69.options).value
                == BloodPressureMeasurement.decode(plain[...]).value)
    }

    // MARK: Beurer BM96

    /// Flags 0xDE (reserved bits 6 and 7), SFLOAT exponent −1 (0xF4F6 = 127.0), MAP NaN,
    /// status 0x0080 (reserved bit 7), as the Stack Overflow questions show.
    @Test func bm96ReservedBitsAndExponentMinusOne() throws {
        let b = bytes("DE F6 F4 20 F3 FF 07 E8 07 03 0F 0A 1E 00 D0 F2 01 80 00")
        let d = try BloodPressureMeasurement.decode(b[...], quirks: QuirkProfile.beurerBM96.options)
        #expect(d.value.systolic.doubleValue == 127)
        #expect(d.value.diastolic.doubleValue == 80)
        #expect(d.value.meanArterialPressure == .nan)
        #expect(d.value.pulseRate?.doubleValue == 72)
        #expect(d.value.userID == 1)
        #expect(d.value.status?.rawValue == 0x0080)
        #expect(d.warnings.map(\.code) == [.quirkApplied])
        #expect(try BloodPressureMeasurement.decode(b[...]).warnings.map(\.code) == [.rfuFlags, .rfuStatus])
        // The warning names the reserved bits only (bits 0–5 are defined; was: the whole word).
        for (status, named) in [("C1 00", "0x00c0"), ("44 01", "0x0140"), ("40 80", "0x8040")] {
            let w = try BloodPressureMeasurement.decode(bytes("10 78 00 50 00 5D 00 " + status)[...]).warnings
            #expect(w.first { $0.code == .rfuStatus }?.message == "reserved Measurement Status bits set: " + named)
        }
        // The user ID sent without its flag (0xD6: bit 3 clear) is still read.
        let noFlag = bytes("D6 F6 F4 20 F3 FF 07 E8 07 03 0F 0A 1E 00 D0 F2 02 44 01")
        let n = try BloodPressureMeasurement.decode(noFlag[...], quirks: QuirkProfile.beurerBM96.options)
        #expect(n.value.userID == 2)
        #expect(n.value.status?.irregularPulse == true)
        #expect(n.value.status?.rawValue == 0x0144)
    }

    // MARK: boso: error readings

    @Test func bosoAllNaNIsAnErrorReading() throws {
        let err = bytes("14 FF 07 FF 07 FF 07 FF 07 00 00")
        let d = try BloodPressureMeasurement.decode(err[...], quirks: QuirkProfile.boso.options)
        #expect(d.warnings.map(\.code) == [.errorReading])
        let json = d.value.json(as: .bloodPressureMeasurement, warnings: d.warnings, raw: .null).serialized()
        #expect(json.contains("\"systolic\":\"NaN\""))
        #expect(json.contains("\"code\":\"error_reading\""))
        // Without the profile: no such warning; with it, a real reading gets none either.
        #expect(try BloodPressureMeasurement.decode(err[...]).warnings.isEmpty)
        #expect(
            try BloodPressureMeasurement.decode(
                bytes("14 78 00 50 00 5D 00 48 00 00 00")[...], quirks: QuirkProfile.boso.options
            ).warnings.isEmpty)
    }

    // MARK: Beurer BM85 family (the existing profile, extended)

    @Test func bm85FamilyFrames() throws {
        // Recorded from a Beurer BM85 (derdilla/blood-pressure-monitor-fl's tests, #735/#737).
        let d = try BloodPressureMeasurement.decode(
            bytes("56 77 00 46 00 00 00 EA 07 08 0B 14 39 00 00 57 01 00 40")[...],
            quirks: QuirkProfile.beurerBM85.options
        ).value
        #expect(d.systolic.doubleValue == 119)
        #expect(d.diastolic.doubleValue == 70)
        #expect(d.pulseRate?.doubleValue == 87)
        #expect(d.userID == 1)
        #expect(d.timestamp?.iso8601 == "2026-08-11T20:57:00")
        // Its MAP field is 0: no measured MAP, never "0 mmHg".
        #expect(d.meanArterialPressure == .nan && d.meanArterialPressureAbsent)
    }

    /// A BM85 frame with a byte after its status (probe J): the user ID is still the byte after
    /// the pulse, the status the two after it, and the extra byte a trailing byte, as it would be
    /// on a standard frame; without the status flag the same.
    @Test func bm85FrameWithATrailingByte() throws {
        for (hex, status) in [
            ("56 77 00 46 00 00 00 EA 07 08 0B 14 39 00 00 57 01 00 40 FF", UInt16(0x0040)),
            ("46 77 00 46 00 00 00 EA 07 08 0B 14 39 00 00 57 01 FF", nil),
        ] {
            let d = try BloodPressureMeasurement.decode(bytes(hex)[...], quirks: QuirkProfile.beurerBM85.options)
            #expect(d.value.userID == 1, "\(hex)")
            #expect(d.value.status?.rawValue == status, "\(hex)")
            #expect(d.value.pulseRate?.doubleValue == 87)
            // (Flags bit 6 and status bit 6, which the real cuff sets, are reserved: rfu warnings.)
            #expect(
                d.warnings.map(\.code).filter { $0 != .rfuFlags && $0 != .rfuStatus } == [
                    .quirkApplied, .quirkApplied, .trailingBytes,  // (MAP 0 absent, user ID without its flag)
                ], "\(hex)")
            #expect(
                d.warnings.first { $0.code == .trailingBytes }?.message.hasPrefix("1 byte") == true, "\(d.warnings)")
        }
        // Two bytes after the pulse with the status flag set and no room for a user ID: the status.
        let s = try BloodPressureMeasurement.decode(
            bytes("56 77 00 46 00 00 00 EA 07 08 0B 14 39 00 00 57 00 40")[...], quirks: QuirkProfile.beurerBM85.options
        )
        #expect(s.value.userID == nil && s.value.status?.rawValue == 0x0040)
    }

    /// Every profile's options decode every truncated prefix of a full value to an error, never a crash.
    @Test func everyProfileRefusesEveryTruncatedPrefix() {
        let full = Self.veroval
        for p in QuirkProfile.all {
            for n in 0..<7 {
                #expect(throws: BPSDecodingError.self) {
                    try BloodPressureMeasurement.decode(full.prefix(n), quirks: p.options)
                }
            }
            for n in 7..<full.count
            where (try? BloodPressureMeasurement.decode(full.prefix(n), quirks: p.options)) != nil {
                // Only a prefix that ends on a field boundary may decode (the user-ID quirk reads a byte
                // the flags did not announce); none crashes.
                #expect(p.options.contains(.userIDWithoutFlag) || n == full.count)
            }
        }
    }
}

/// `cuff scan`'s naming of what it would use for each device.
@Suite("Recognising cuffs from their advertising")
struct RecognitionTests {
    @Test func profilesProtocolsAndNone() {
        func r(
            _ name: String?, _ s16: [UInt16] = [], _ s128: [String] = [],
            _ md: [(companyID: UInt16, data: [UInt8])] = []
        ) -> CuffRecognition {
            CuffRecognition.recognise(name: name, serviceUUIDs16: s16, serviceUUIDs128: s128, manufacturerData: md)
        }
        #expect(r("X4 Smart", [0x1810]) == .standard)
        #expect(r("X4 Smart", [0x1810]).protocolName == "bps")
        #expect(r("SBM69", [0x1810]) == .profile(.sbm69))
        #expect(r(nil, [], [], [(0x0ABF, [0x01, 0x02])]).profileName == "veroval")
        #expect(r("BP3GY1-2N") == .vendorProtocol("microlife"))
        #expect(r(nil, [], ["cdeacd80-5235-4c07-8846-93a37ee6b86d"]) == .vendorProtocol("yonker"))
        #expect(r("YK-IBPA1").protocolName == "yonker")
        #expect(r("BP3L 123").protocolName == "no public protocol (iHealth)")
        #expect(r("Withings BPM Connect").protocolName == "no public protocol (Withings)")
        #expect(r("BPX1").protocolName == "no public protocol (Xiaomi)")
        #expect(r("Microlife B6").protocolName == "no public protocol (Microlife (models other than BP3GY1-2N))")
        #expect(r("Mi Smart Band 8", [0xFE95]) == .unknown)
        #expect(r("cuff-sim", [0x1810]).profileName == nil)
        #expect(r(nil) == .unknown && r(nil).protocolName == nil)
    }
}
