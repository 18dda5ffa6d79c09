import BloodPressure
import CuffCore
import CuffSession
import CuffSimulator
import GATT
import Testing
@testable import Omron

/// What GATTLink drives: an ``OmronCentral`` alone, or the ``ProtocolSession`` a driver holds.
protocol LinkCentral {
    var nextDeadline: Timestamp? { get }
    mutating func start(at: EventTime) -> [CentralAction]
    mutating func receive(_ pdu: [UInt8], at: EventTime) -> [CentralAction]
    mutating func tick(at: EventTime) -> [CentralAction]
    mutating func disconnected(_ why: String?, at: EventTime) -> [CentralAction]
}

extension OmronCentral: LinkCentral {}
extension ProtocolSession: LinkCentral {}

/// OmronCentral ↔ OmronPeripheral joined PDU by PDU in process, on a virtual clock.
struct GATTLink {
    var central: any LinkCentral
    var peripheral: OmronPeripheral
    var now = Timestamp.zero
    var records: [SessionOutput] = []
    var logs: [String] = []
    var outcome: SessionOutcome?
    var pdus = 0
    /// Drop the link as soon as this many measurements are out (a radio lost mid-sync).
    var dropAfterMeasurements: Int?
    /// How long each notification of the cuff (its answers on the RX channels) takes to reach the
    /// central (a slow or stalling cuff).
    var replyDelay: Duration = .zero

    init(
        _ p: OmronProfile, peripheral: OmronPeripheral, options: OmronSyncOptions = OmronSyncOptions(),
        localSeconds: Int64 = localNow, timeLimit: Duration? = nil, follow: Bool = false
    ) {
        central = OmronCentral(
            profile: p, options: options, device: DeviceInfo(address: "unix:/test"),
            utcOffsetSeconds: localSeconds - 1_795_622_400, timeLimit: timeLimit, follow: follow)
        self.peripheral = peripheral
    }

    /// The session a driver runs, choosing the protocol and the profile as `cuff measure` does without --model.
    init(
        peripheral: OmronPeripheral, localSeconds: Int64 = localNow, gattCache: GATTCacheMode = .off,
        keepUnread: Bool = false
    ) {
        var c = CuffSessionConfiguration(address: "unix:/test")
        c.localUTCOffsetSeconds = localSeconds - 1_795_622_400
        c.logs = true
        c.gattCache = gattCache
        c.omronSync.keepUnread = keepUnread
        central = ProtocolSession(configuration: c)
        self.peripheral = peripheral
    }

    var at: EventTime { EventTime(monotonic: now, wallMicros: 1_795_622_400_000_000 + now.nanoseconds / 1000) }

    mutating func run() -> SessionOutcome? {
        _ = peripheral.connected(now: now, client: nil)
        var toPeripheral: [[UInt8]] = []
        var toCentral: [(at: Timestamp, pdu: [UInt8])] = []
        func take(_ out: [CuffCentral.Output], _ link: inout GATTLink, _ q: inout [[UInt8]]) -> Bool {
            var dropped = false
            for o in out {
                switch o {
                case let .send(pdu): q.append(pdu)
                case let .emit(r): link.records.append(r)
                case let .finished(o): link.outcome = o
                case .disconnect: dropped = true
                case let .log(s): link.logs.append(s)
                case .raiseSecurity: break
                }
            }
            return dropped
        }
        var down = take(central.start(at: at), &self, &toPeripheral)
        for _ in 0..<2_000_000 where outcome == nil {
            if let n = dropAfterMeasurements, measurements.count >= n { down = true }
            if down {
                _ = peripheral.disconnected(now: now)
                _ = take(central.disconnected("closed", at: at), &self, &toPeripheral)
                break
            }
            if !toPeripheral.isEmpty {
                pdus += 1
                for o in peripheral.receive(toPeripheral.removeFirst(), now: now) {
                    switch o {
                    case let .send(pdu): toCentral.append((now + (pdu.first == 0x1B ? replyDelay : .zero), pdu))
                    case .disconnect: down = true
                    case .log: break
                    }
                }
            } else if let next = toCentral.first, central.nextDeadline.map({ next.at <= $0 }) ?? true {
                pdus += 1
                now = max(now, next.at)
                toCentral.removeFirst()
                down = take(central.receive(next.pdu, at: at), &self, &toPeripheral) || down
            } else if let d = central.nextDeadline {
                now = max(now, d)
                down = take(central.tick(at: at), &self, &toPeripheral) || down
            } else {
                break
            }
        }
        if outcome != nil { _ = peripheral.disconnected(now: now) }
        return outcome
    }

    var measurements: [MeasurementRecord] { records.compactMap { if case let .measurement(m) = $0 { m } else { nil } } }
    var end: SessionRecord? {
        records.compactMap { if case let .session(s) = $0, s.event == .end { s } else { nil } }.last
    }
}

@Suite("Omron over GATT")
struct GATTLinkTests {
    /// Every profile over real ATT PDUs: all users' readings as measurement records, the session end
    /// with clock_drift_s, keep-unread twice, then nothing new.
    @Test(arguments: OmronCatalog.profiles)
    func everyProfileOverATT(p: OmronProfile) throws {
        let cuff = OmronSimulator(profile: p, seed: 11, localSeconds: localNow)
        let expected = p.users.indices.flatMap { u in cuff.unreadReadings(user: u).map { (u + 1, $0) } }
        var peripheral = OmronPeripheral(cuff: cuff, localAtPowerOn: localNow)
        peripheral.poweredOn(now: .zero)

        var keep = GATTLink(p, peripheral: peripheral, options: OmronSyncOptions(keepUnread: true))
        #expect(keep.run() == .completed)
        #expect(keep.measurements.map(\.userID) == expected.map { UInt8($0.0) })
        #expect(keep.measurements.map(\.systolic) == expected.map { SFloat(Double($0.1.systolic)) })
        #expect(keep.measurements.map(\.timestamp) == expected.map(\.1.time.iso8601))
        let line = try #require(keep.measurements.first).json.serialized()
        #expect(line.contains(#""characteristic":"omron""#) && line.contains(#""model":"\#(p.id)""#))
        #expect(keep.end?.clockDriftSeconds == -97)
        #expect(keep.end?.json.serialized().contains(#""clock_drift_s":-97"#) == true)

        var again = GATTLink(p, peripheral: keep.peripheral, options: OmronSyncOptions(keepUnread: true))
        again.now = keep.now + .seconds(30)
        #expect(again.run() == .completed)
        #expect(again.measurements.map(\.raw) == keep.measurements.map(\.raw))

        var mark = GATTLink(p, peripheral: again.peripheral)
        mark.now = again.now + .seconds(30)
        #expect(mark.run() == .completed)
        #expect(mark.measurements.map(\.raw) == keep.measurements.map(\.raw))
        #expect(Set(mark.measurements.map(\.dedupKey)) == Set(keep.measurements.map(\.dedupKey)))

        var none = GATTLink(p, peripheral: mark.peripheral)
        none.now = mark.now + .seconds(30)
        #expect(none.run() == .noResult)
        #expect(none.measurements.isEmpty)
    }

    /// The GATT cache in process, on every profile, without --model: a second session given what
    /// the first learned goes straight to the Omron service (no discovery, no model number read,
    /// no standard session first), reads the same records, and learns nothing new.
    @Test(arguments: OmronCatalog.profiles)
    func aKnownCuffSkipsDiscovery(p: OmronProfile) throws {
        var peripheral = OmronPeripheral(
            cuff: OmronSimulator(profile: p, seed: 11, localSeconds: localNow), localAtPowerOn: localNow)
        peripheral.poweredOn(now: .zero)
        var first = GATTLink(peripheral: peripheral, gattCache: .on(nil), keepUnread: true)
        let outcome = first.run()
        let learned = try #require((first.central as? ProtocolSession)?.learned, "\(first.logs)")
        #expect(first.end?.gattCache == .miss && !first.measurements.isEmpty)
        #expect(learned.values[.modelNumber] == Array(p.id.utf8))

        var second = GATTLink(peripheral: first.peripheral, gattCache: .on(learned), keepUnread: true)
        second.now = first.now + .seconds(30)
        #expect(second.run() == outcome)
        #expect(second.end?.gattCache == .hit, "\(second.logs)")
        #expect(!second.logs.contains { $0.contains("handing the link") }, "\(second.logs)")
        #expect(second.measurements.map(\.raw) == first.measurements.map(\.raw))
        #expect(second.measurements.map(\.device) == first.measurements.map(\.device))
        let before = try #require(first.end?.attRequests), after = try #require(second.end?.attRequests)
        #expect(after <= before - 8, "\(before) → \(after)")
        #expect((second.central as? ProtocolSession)?.learned == learned)
    }

    /// `--timeout` bounds a sync whatever the cuff does: one that answers every frame 4.5 s late
    /// (inside the 5 s reply timeout) times out at the limit when no reading came by then (probe
    /// V: `--timeout 10` ran 55 s); with a limit after its first readings those stand, and the
    /// sync stops at the limit.
    @Test func aCuffThatAnswersJustInTimeIsBoundByTheTimeLimit() throws {
        let p = try #require(OmronCatalog.profile(named: "HEM-7361T"))
        var peripheral = OmronPeripheral(
            cuff: OmronSimulator(profile: p, seed: 11, localSeconds: localNow), localAtPowerOn: localNow)
        peripheral.poweredOn(now: .zero)
        func slowRun(_ limit: Duration?, follow: Bool = false) -> GATTLink {
            var link = GATTLink(p, peripheral: peripheral, timeLimit: limit, follow: follow)
            link.replyDelay = .milliseconds(4500)
            _ = link.run()
            return link
        }
        // Without a limit: how long the slow cuff takes to its first reading and to its end.
        let whole = slowRun(nil)
        #expect(whole.outcome == .completed)
        let first = try #require(whole.measurements.first?.receivedAt.monotonic) - .zero
        let last = try #require(whole.measurements.last?.receivedAt.monotonic) - .zero
        try #require(first > .seconds(10) && last > first, "\(first) \(last)")

        let none = slowRun(.seconds(10))
        #expect(none.outcome == .timedOut)
        #expect(none.now - .zero <= .seconds(10))
        #expect(none.measurements.isEmpty)
        #expect(none.end?.message == "no result within 10.0 s")
        #expect(none.logs.last == "no result within 10.0 s", "said on stderr too")

        let limit = Duration.seconds(Int64(((first + last) / 2).components.seconds))
        let some = slowRun(limit)
        #expect(some.outcome == .completed)
        #expect(some.now - .zero <= limit)
        #expect(!some.measurements.isEmpty && some.measurements.count < whole.measurements.count)
        #expect(some.end?.message == "time limit reached (\(limit.secondsDouble) s)")
        // With --follow, as the standard session: once readings came, the sync goes on to its end.
        let followed = slowRun(limit, follow: true)
        #expect(followed.outcome == .completed && followed.end?.message == nil)
        #expect(followed.measurements.map(\.raw) == whole.measurements.map(\.raw))

        // A cuff in time is not touched by the limit.
        var quick = GATTLink(p, peripheral: peripheral, timeLimit: .seconds(10))
        #expect(quick.run() == .completed)
        #expect(quick.end?.message == nil)
        #expect(quick.measurements.map(\.raw) == whole.measurements.map(\.raw))
    }

    @Test func wrongTransportIsServiceMissing() {
        let modern = OmronCatalog.profile(named: "HEM-7142T2")!
        let classic = OmronCatalog.profile(named: "HEM-7361T")!
        var l = GATTLink(
            classic,
            peripheral: OmronPeripheral(
                cuff: OmronSimulator(profile: modern, localSeconds: localNow), localAtPowerOn: localNow))
        #expect(l.run() == .serviceMissing)
        #expect(l.end?.message?.contains("modern") == true)
    }

    /// Without --model the family discovery found picks the profile: "X4 Smart" (HEM-7155T,
    /// classic, in the catalog) on the FE4A HEM-7155T_ESL1 reads it as HEM-7155T-MW3; a cuff that
    /// names no model gets its own family's default (HEM-7361T on the classic service).
    @Test(arguments: [
        ("HEM-7155T-MW3", "X4 Smart", "HEM-7155T-MW3"), ("HEM-7361T", "", "HEM-7361T"),
        ("HEM-7142T2", "", "HEM-7142T2"), ("HEM-7155T", "X4 Smart", "HEM-7155T"),
    ])
    func profileOfTheFamilyDiscoveryFound(cuffProfile: String, modelNumber: String, used: String) throws {
        let p = try #require(OmronCatalog.profile(named: cuffProfile))
        let cuff = OmronSimulator(profile: p, seed: 5, localSeconds: localNow)
        let expected = p.users.indices.flatMap { u in cuff.unreadReadings(user: u).map { (u + 1, $0) } }
        var peripheral = OmronPeripheral(cuff: cuff, localAtPowerOn: localNow, modelNumber: modelNumber)
        peripheral.poweredOn(now: .zero)
        var l = GATTLink(peripheral: peripheral)
        #expect(l.run() == .completed, "\(l.logs)")
        #expect(l.measurements.map(\.userID) == expected.map { UInt8($0.0) })
        #expect(l.measurements.map(\.timestamp) == expected.map(\.1.time.iso8601))
        let line = try #require(l.measurements.first).json.serialized()
        #expect(line.contains(#""model":"\#(used)""#), "\(line)")
        // Device Information's words when they name the profile used, else its id.
        #expect(l.measurements.allSatisfy { $0.device.model == (cuffProfile == "HEM-7155T" ? modelNumber : used) })
        if cuffProfile != used || modelNumber.isEmpty {
            #expect(l.logs.contains { $0.contains(used) && $0.contains("--model NAME") }, "\(l.logs)")
        }
    }

    /// A model no profile knows: said, with the closest profile; with the standard Blood Pressure
    /// Service beside the Omron one the standard session reads it (the newest reading), else the
    /// closest profile of the family found does.
    @Test func unknownModelFallsBackToTheStandardService() throws {
        let p = try #require(OmronCatalog.profile(named: "HEM-7380T1"))
        let cuff = OmronSimulator(profile: p, seed: 6, localSeconds: localNow)
        var both = OmronPeripheral(
            cuff: cuff, localAtPowerOn: localNow, modelNumber: "HEM-7380T5", standardService: true)
        both.poweredOn(now: .zero)
        var l = GATTLink(peripheral: both)
        #expect(l.run() == .completed, "\(l.logs)")
        #expect(
            l.logs.contains {
                $0.contains("unknown Omron model HEM-7380T5") && $0.contains("closest profile is HEM-7380T1")
                    && $0.contains("standard Blood Pressure Service")
            }, "\(l.logs)")
        let m = try #require(l.measurements.first)
        #expect(l.measurements.count == 1)
        #expect(m.characteristic == .bloodPressureMeasurement)
        let newest = try #require(cuff.stored(user: 0).last)
        #expect(m.systolic == SFloat(Double(newest.systolic)) && m.timestamp == newest.time.iso8601)

        var omronOnly = OmronPeripheral(cuff: cuff, localAtPowerOn: localNow, modelNumber: "HEM-7380T5")
        omronOnly.poweredOn(now: .zero)
        var o = GATTLink(peripheral: omronOnly)
        #expect(o.run() == .completed, "\(o.logs)")
        #expect(
            o.logs.contains {
                $0.contains("unknown Omron model HEM-7380T5; using the closest modern profile, HEM-7380T1")
            }, "\(o.logs)")
        #expect(o.measurements.count == p.users.indices.map { cuff.unreadReadings(user: $0).count }.reduce(0, +))
        #expect(o.measurements.allSatisfy { $0.characteristic == .named("omron") && $0.device.model == "HEM-7380T1" })
    }

    @Test func refusedKeyAndDroppedLinkOverATT() {
        let p = OmronCatalog.profile(named: "HEM-7600T")!
        var r = GATTLink(
            p,
            peripheral: OmronPeripheral(
                cuff: OmronSimulator(profile: p, scenario: .refusedKey, localSeconds: localNow),
                localAtPowerOn: localNow))
        #expect(r.run() == .keyRefused)
        #expect(r.end?.message?.contains("refused the key") == true)
        var d = GATTLink(
            p,
            peripheral: OmronPeripheral(
                cuff: OmronSimulator(profile: p, scenario: .droppedLink, localSeconds: localNow),
                localAtPowerOn: localNow))
        #expect(d.run() == .disconnected)
        #expect(d.measurements.isEmpty)
        #expect((d.central as? OmronCentral)?.exitCode == 4, "dropped before any reading")
        // Dropped after readings were out: the exit status is 0, as for every protocol (it was 4);
        // nothing was marked read, so the cuff sends them again next time.
        var late = GATTLink(
            p,
            peripheral: OmronPeripheral(
                cuff: OmronSimulator(profile: p, seed: 11, localSeconds: localNow), localAtPowerOn: localNow))
        late.dropAfterMeasurements = 2
        #expect(late.run() == .disconnected)
        #expect(late.measurements.count == 2)
        #expect((late.central as? OmronCentral)?.exitCode == 0)
    }
}

extension GATTLinkTests {
    /// Probe A2: `--model` naming a profile of another memory map than the model the cuff names
    /// itself (a HEM-7322T read as a HEM-7361T) read garbage and wrote a clock window outside any
    /// of the cuff's areas. The sync now only reads: the cuff's memory is left byte for byte.
    @Test func aForcedModelOfAnotherMemoryMapWritesNothing() throws {
        let own = try #require(OmronCatalog.profile(named: "HEM-7322T"))
        let forced = try #require(OmronCatalog.profile(named: "HEM-7361T"))
        let peripheral = OmronPeripheral(
            cuff: OmronSimulator(profile: own, seed: 3, localSeconds: localNow), localAtPowerOn: localNow)
        let before = peripheral.cuff.memory
        func changed(_ after: [UInt8]) -> Set<Int> {
            Set(zip(after, before).enumerated().filter { $0.element.0 != $0.element.1 }.map(\.offset))
        }
        // What a session that writes nothing leaves changed: the cuff's own clock, ticking.
        var readOnly = GATTLink(
            own, peripheral: peripheral, options: OmronSyncOptions(keepUnread: true, setTime: false))
        _ = readOnly.run()
        let ticking = changed(readOnly.peripheral.cuff.memory)
        var link = GATTLink(forced, peripheral: peripheral)
        _ = link.run()
        let written = changed(link.peripheral.cuff.memory).subtracting(ticking)
        #expect(
            written.isEmpty,
            "the cuff's memory was written at \(written.sorted().prefix(20).map { String($0, radix: 16) })")
        #expect(
            link.logs.contains { $0.hasPrefix("warning: the cuff names itself HEM-7322T (profile HEM-7322T)") },
            "\(link.logs)")
        // Its own profile still syncs and marks what it read.
        var right = GATTLink(own, peripheral: link.peripheral)
        _ = right.run()
        #expect(!right.measurements.isEmpty && right.peripheral.cuff.memory != before)
        #expect(!right.logs.contains { $0.contains("names itself") })
    }
}
