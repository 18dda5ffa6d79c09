import Testing
import BloodPressure
import CuffCore
@testable import CuffSession

/// What a device family's profile changes in the session's plan (shared/spec/other-cuffs.md).
@Suite("Quirk profiles in the session")
struct QuirkSessionTests {
    static let andProfile = CuffProfile(
        hasBloodPressureService: true,
        characteristics: [
            .bloodPressureMeasurement: .indicate, .bloodPressureFeature: .read, .dateTime: [.read, .write],
            .deviceName: .read, .modelNumber: .read,
        ])

    static func requests(_ a: [CuffSessionMachine.Action]) -> [String] {
        a.compactMap {
            switch $0 {
            case let .read(c): "read \(c.rawValue)"
            case let .write(c, v): "write \(c.rawValue) \(v.count)"
            case let .subscribe(c, _): "subscribe \(c.rawValue)"
            default: nil
            }
        }
    }

    /// Learned from the name read: the Date Time write and the subscription go next, before the
    /// other reads (the A&D cuff hangs up unless both come within about 5 s).
    @Test func andClockAndSubscriptionFirstOnceRecognised() {
        var m = CuffSessionMachine(configuration: CuffSessionConfiguration(address: "test"))
        var seen: [String] = []
        var a = m.handle(.start(t(0))) + m.handle(.connected(t(0.1)))
        a = m.handle(.discovered(Self.andProfile, t(0.2)))
        seen += Self.requests(a)
        a = m.handle(.readCompleted(.bloodPressureFeature, [0x3F, 0], t(0.3)))
        seen += Self.requests(a)
        a = m.handle(.readCompleted(.deviceName, Array("UA-651BLE".utf8), t(0.4)))
        #expect(a.contains(.log("applying quirk profile and-ua651 for UA-651BLE")))
        seen += Self.requests(a)
        a = m.handle(.writeCompleted(.dateTime, t(0.5)))
        seen += Self.requests(a)
        a = m.handle(.subscribed(.bloodPressureMeasurement, t(0.6)))
        seen += Self.requests(a)
        #expect(
            seen == [
                "read bloodPressureFeature", "read deviceName", "write dateTime 7",
                "subscribe bloodPressureMeasurement", "read modelNumber",
            ])
    }

    @Test func forcedAndProfileStartsWithTheClock() throws {
        var c = CuffSessionConfiguration(address: "test")
        c.quirk = .andUA651
        var m = CuffSessionMachine(configuration: c)
        _ = m.handle(.start(t(0)))
        _ = m.handle(.connected(t(0.1)))
        let a = m.handle(.discovered(Self.andProfile, t(0.2)))
        guard
            case let .write(.dateTime, v)? = a.first(where: {
                if case .write = $0 { true } else if case .read = $0 { true } else { false }
            })
        else {
            Issue.record("first request is not the Date Time write: \(a)")
            return
        }
        // The host's local wall-clock time of the session start, as a 2A08 value.
        #expect(try DateTime.decode(v[...]).value == DateTime(unixSeconds: t(0).wallMicros / 1_000_000))
    }

    /// A strict cuff with a writable Date Time gets no such write (no profile, no change).
    @Test func strictCuffIsNotGivenTheClockWrite() {
        var m = CuffSessionMachine(configuration: CuffSessionConfiguration(address: "test"))
        _ = m.handle(.start(t(0)))
        _ = m.handle(.connected(t(0.1)))
        var a = m.handle(.discovered(Self.andProfile, t(0.2)))
        var seen = Self.requests(a)
        a = m.handle(.readCompleted(.bloodPressureFeature, [0x3F, 0], t(0.3)))
        seen += Self.requests(a)
        a = m.handle(.readCompleted(.deviceName, Array("X4 Smart".utf8), t(0.4)))
        seen += Self.requests(a)
        a = m.handle(.readCompleted(.modelNumber, Array("HEM-7155T".utf8), t(0.5)))
        seen += Self.requests(a)
        #expect(
            seen == [
                "read bloodPressureFeature", "read deviceName", "read modelNumber",
                "subscribe bloodPressureMeasurement",
            ])
        #expect(m.activeProfile == nil)
    }

    /// A result indicated before the name and model are read (a bonded cuff that kept its
    /// subscription) is held, unconfirmed, until they are, then decoded with the profile they
    /// pick (probe O: a BM85 reading came out as the standard layout: MAP 0, pulse -20480000).
    @Test func aResultBeforeTheIdentityReadsIsDecodedWithTheProfile() throws {
        let bm85 = hx("16 7B 00 50 00 00 00 E8 07 03 0F 08 1E 00 00 48 01 00 04")
        let profile = CuffProfile(
            hasBloodPressureService: true,
            characteristics: [.bloodPressureMeasurement: .indicate, .deviceName: .read, .modelNumber: .read])
        var h = Harness()
        var a = h.send(.start(t(0)))
        a = h.send(.connected(t(0.01)))
        a = h.send(.discovered(profile, t(0.02)))
        #expect(a.contains(.read(.deviceName)))
        let early = h.send(.indication(.bloodPressureMeasurement, bm85, t(0.03)))
        #expect(!early.contains(.confirmIndication), "held unconfirmed")
        #expect(h.measurements.isEmpty)
        a = h.send(.readCompleted(.deviceName, Array("BM85".utf8), t(0.04)))
        #expect(!a.contains(.confirmIndication), "the model is still to come")
        a = h.send(.readCompleted(.modelNumber, Array("BM85".utf8), t(0.05)))
        #expect(a.contains(.confirmIndication))
        let m = try #require(h.measurements.first)
        #expect(h.measurements.count == 1)
        #expect(m.meanArterialPressure == .nan && m.pulseRate?.doubleValue == 72 && m.userID == 1, "\(m)")
        #expect(m.device.model == "BM85")
        #expect(m.receivedAt == t(0.03), "received when it came")
    }

    /// The advertised name alone picks the profile, before anything is read.
    @Test func advertisedNameSelectsTheProfile() {
        var c = CuffSessionConfiguration(address: "AA:BB:CC:DD:EE:FF")
        c.advertisedName = "SBM69"
        var m = CuffSessionMachine(configuration: c)
        let a = m.handle(.start(t(0)))
        #expect(m.activeProfile?.name == "sbm69")
        #expect(a.contains(.log("applying quirk profile sbm69 for SBM69 (its advertised name)")))
    }

    /// QardioArm's control characteristic: `--start` writes F1 01 there, and Ctrl-C sends no
    /// stop command (none is known) but disconnects.
    @Test func qardioStartBytes() {
        var c = CuffSessionConfiguration(address: "test")
        c.sendStart = true
        var p = CuffProfile(
            hasBloodPressureService: true,
            characteristics: [.bloodPressureMeasurement: .indicate, .cuffControl: .write])
        p.vendorStart = QuirkProfile.qardio.vendorStart
        var m = CuffSessionMachine(configuration: c)
        _ = m.handle(.start(t(0)))
        _ = m.handle(.connected(t(0.1)))
        _ = m.handle(.discovered(p, t(0.2)))
        #expect(m.activeProfile?.name == "qardio")
        let a = m.handle(.subscribed(.bloodPressureMeasurement, t(0.3)))
        #expect(a.contains(.write(.cuffControl, [0xF1, 0x01])))
        _ = m.handle(.writeCompleted(.cuffControl, t(0.4)))
        let stop = m.handle(.stopRequested(t(1)))
        #expect(!stop.contains { if case .write = $0 { true } else { false } })
        #expect(stop.contains(.disconnect))
    }

    /// A&D's NaN markers are skipped (said), confirmed, and not counted; a strict session keeps
    /// an all-NaN result as an error reading.
    @Test func markersSkippedOnlyWithTheProfile() {
        let marker: [UInt8] = [0x00, 0xFF, 0x07, 0xFF, 0x07, 0xFF, 0x07]
        for forced in [QuirkProfile.andUA651, nil] {
            var c = CuffSessionConfiguration(address: "test")
            c.quirk = forced
            var h = Harness(c)
            h.toReady(profile: Self.andProfile)
            let a = h.send(.indication(.bloodPressureMeasurement, marker, t(3)))
            #expect(a.contains(.confirmIndication))
            #expect(h.measurements.count == (forced == nil ? 1 : 0))
            #expect(
                a.contains { if case let .log(s) = $0 { s.hasPrefix("skipped a marker record") } else { false } }
                    == (forced != nil))
        }
    }

    /// The markers come before the buffer: an all-NaN result after a reading is an error reading
    /// the cuff kept, and is kept too (probe O: it was skipped as a marker, and lost).
    @Test func anAllNaNResultAfterAReadingIsNoMarker() {
        let marker: [UInt8] = [0x00, 0xFF, 0x07, 0xFF, 0x07, 0xFF, 0x07]
        let reading: [UInt8] = [0x00, 0x78, 0x00, 0x50, 0x00, 0x5D, 0x00]
        var c = CuffSessionConfiguration(address: "test")
        c.quirk = .andUA651
        var h = Harness(c)
        h.toReady(profile: Self.andProfile)
        for (i, v) in [marker, marker, reading, marker, reading].enumerated() {
            let a = h.send(.indication(.bloodPressureMeasurement, v, t(3 + Double(i))))
            #expect(a.contains(.confirmIndication))
        }
        #expect(h.measurements.count == 3)
        #expect(h.measurements.map { $0.systolic == .nan } == [false, true, false])
    }

    /// An A&D cuff with nothing new sends its markers and hangs up: the session ends completed
    /// (no result, exit 2), as with readings (was: `disconnected`, exit 4, as a lost link). A
    /// hang-up before any marker is still a disconnection.
    @Test func aHangUpAfterTheMarkersCompletesTheSession() {
        let marker: [UInt8] = [0x00, 0xFF, 0x07, 0xFF, 0x07, 0xFF, 0x07]
        for markers in [2, 0] {
            var c = CuffSessionConfiguration(address: "test")
            c.quirk = .andUA651
            var h = Harness(c)
            h.toReady(profile: Self.andProfile)
            for i in 0..<markers { _ = h.send(.indication(.bloodPressureMeasurement, marker, t(3 + Double(i)))) }
            _ = h.send(.disconnected(nil, t(6)))
            #expect(h.outcome == (markers > 0 ? .completed : .disconnected), "\(markers) markers")
            #expect(
                h.m.exitCode == (markers > 0 ? SessionOutcome.noResult.exitCode : SessionOutcome.disconnected.exitCode))
            #expect(h.measurements.isEmpty)
        }
    }
}
