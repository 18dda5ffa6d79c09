import BloodPressure
import CuffCore
import Testing
@testable import Omron

/// 2026-11-25 16:00:00 local.
let localNow: Int64 = 1_795_622_400

func link(
    _ p: OmronProfile, _ scenario: OmronScenario = .normal, seed: UInt64 = 7, paired: Bool = true,
    _ options: OmronSyncOptions = OmronSyncOptions()
) -> OmronInProcessLink {
    OmronInProcessLink(
        cuff: OmronSimulator(profile: p, scenario: scenario, seed: seed, paired: paired, localSeconds: localNow),
        session: OmronSession(profile: p, options: options, localSeconds: localNow), localOrigin: localNow)
}

extension OmronInProcessLink {
    mutating func again(_ options: OmronSyncOptions = OmronSyncOptions()) -> OmronSessionOutcome? {
        reconnect(options)
        return run()
    }
}

@Suite("Omron session against the simulated cuff")
struct SessionTests {
    /// Every profile: all users' unread readings out; again with --keep-unread (the same ones);
    /// then none new; --all-records gives every stored reading.
    @Test(arguments: OmronCatalog.profiles)
    func everyProfileRoundTrips(p: OmronProfile) throws {
        var l = link(p)
        let expected = p.users.indices.flatMap { u in l.cuff.unreadReadings(user: u).map { (u + 1, $0) } }
        #expect(!expected.isEmpty)

        #expect(l.run() == .completed)
        let kept = l.readings
        #expect(kept.map(\.user) == expected.map(\.0))
        #expect(kept.map(\.reading) == expected.map(\.1))
        // hass-omron's default reads, none of them marked.
        var k = link(p, .normal, seed: 7, paired: true, OmronSyncOptions(keepUnread: true))
        #expect(k.run() == .completed)
        #expect(k.readings == kept)
        #expect(k.again(OmronSyncOptions(keepUnread: true)) == .completed)
        #expect(k.readings == kept, "keep-unread leaves the counters")
        #expect(k.again() == .completed)
        #expect(k.readings == kept)
        #expect(k.again() == .completed)
        #expect(k.readings.isEmpty, "nothing new after a marking sync")

        // The marked cuff: nothing new.
        #expect(l.again() == .completed)
        #expect(l.readings.isEmpty)
        // All records: every user's ring, oldest first.
        #expect(l.again(OmronSyncOptions(allRecords: true)) == .completed)
        let all = p.users.indices.flatMap { u in l.cuff.stored(user: u).map { (u + 1, $0) } }
        #expect(l.readings.map(\.reading) == all.map(\.1))
        #expect(l.readings.map(\.user) == all.map(\.0))
        // A new reading after the sync is the only one the next sync gets.
        let r = OmronReading(
            systolic: 141, diastolic: 91, pulse: 77, time: DateTime(unixSeconds: localNow + 30), sequence: 99)
        l.cuff.measure(user: 0, r)
        #expect(l.again() == .completed)
        #expect(l.readings.map(\.reading) == [l.cuff.stored(user: 0).last!])
        #expect(l.readings.first?.reading.systolic == 141)
    }

    @Test(arguments: OmronCatalog.profiles)
    func clockIsReadDriftReportedAndSetOnce(p: OmronProfile) throws {
        var l = link(p)
        #expect(l.run() == .completed)
        // The simulated cuff runs 97 s slow.
        #expect(l.clockReports.count == 1)
        #expect(l.clockReports.first?.drift == -97)
        let clockAddress = Int(p.settingsWrite) + p.clock.offset
        let clockWrites = l.trace.filter { c, b in
            guard case .tx(0) = c, b.count > 6, b[1] == 0x01, b[2] == 0xC0 else { return false }
            return Int(b[3]) << 8 | Int(b[4]) == clockAddress
        }
        #expect(clockWrites.count == 1)
        #expect(l.cuff.clockWrites == 1)
        // Now in step.
        #expect(l.again(OmronSyncOptions(setTime: false)) == .completed)
        let drift = try #require(l.clockReports.first?.drift)
        #expect(abs(drift) <= 1)
        #expect(l.cuff.clockWrites == 1, "--no-set-time writes no clock")
    }

    /// A slot that does not decode is no record read: the unread counters are left as they were,
    /// said once, and the next sync reads the records again (probe W: the counters were cleared,
    /// telling the cuff that all four records were taken when the store held one).
    @Test func aSlotThatDoesNotDecodeLeavesTheCountersAlone() throws {
        let p = try #require(OmronCatalog.profile(named: "HEM-7361T"))
        var l = link(p)
        // Hour 31: the slot holds it, no decoder takes it.
        l.cuff.measure(
            user: 0,
            OmronReading(
                systolic: 141, diastolic: 91, pulse: 77,
                time: DateTime(year: 2026, month: 11, day: 25, hours: 31, minutes: 0, seconds: 0)))
        #expect(l.run() == .completed)
        let first = l.readings
        #expect(!first.isEmpty)
        #expect(l.badRecords.count == 1)
        #expect(l.countersKept)
        #expect(l.again() == .completed)
        #expect(l.readings == first, "read again: the cuff still counts them unread")
        #expect(l.badRecords.count == 1)
        // A cuff whose slots all decode has its counters cleared as before.
        var fine = link(p)
        #expect(fine.run() == .completed)
        #expect(!fine.countersKept)
        #expect(fine.again() == .completed)
        #expect(fine.readings.isEmpty)
    }

    @Test func fullMemoryWraps() throws {
        for p in OmronCatalog.profiles {
            var l = link(p, .fullMemory)
            #expect(l.run() == .completed)
            #expect(l.readings.count == p.users.map(\.records).reduce(0, +))
            for u in p.users.indices {
                #expect(
                    l.readings.filter { $0.user == u + 1 }.map(\.reading) == l.cuff.stored(user: u),
                    "\(p.id) user \(u + 1)")
            }
            // Times come out in order per user although the ring wrapped.
            for u in p.users.indices {
                let times = l.readings.filter { $0.user == u + 1 }.compactMap { $0.reading.time.unixSeconds }
                #expect(times == times.sorted())
                // Every reading was taken before the cuff's clock started (probe N: up to 3 days after).
                #expect(times.allSatisfy { $0 <= localNow - 600 }, "\(p.id) user \(u + 1): \(times.max() ?? 0)")
            }
            #expect(l.again() == .completed)
            #expect(l.readings.isEmpty)
        }
    }

    @Test func userWithoutReadings() {
        let p = OmronCatalog.profile(named: "HEM-7361T")!
        var l = link(p, .emptyUser)
        #expect(l.cuff.entry(1) == .empty)
        #expect(l.run() == .completed)
        #expect(Set(l.readings.map(\.user)) == [1])
        #expect(l.readings.count == 3)
        #expect(l.again(OmronSyncOptions(allRecords: true)) == .completed)
        #expect(l.readings.count == 3)
    }

    @Test func clockResetAfterBatteryChange() throws {
        for id in ["HEM-7322T", "HEM-7142T2", "HEM-6232T", "HEM-6401T", "HEM-7386T1"] {
            let p = OmronCatalog.profile(named: id)!
            var l = link(p, .clockReset)
            #expect(l.run() == .completed)
            let d = try #require(l.clockReports.first?.drift)
            #expect(d < -800_000_000, "\(id): a clock at 2000-01-01")
            #expect(l.again() == .completed)
            #expect(abs(try #require(l.clockReports.first?.drift)) <= 1, "\(id): set by the first session")
        }
    }

    @Test func droppedLinkKeepsWhatArrivedAndLosesNothing() {
        for id in ["HEM-7361T", "HEM-7600T", "HEM-7380T1"] {
            let p = OmronCatalog.profile(named: id)!
            var l = link(p, .droppedLink)
            let unread = p.users.indices.flatMap { l.cuff.unreadReadings(user: $0) }
            #expect(l.run() == .disconnected)
            // Nothing was marked read: the next session gets them all.
            #expect(l.again() == .completed)
            #expect(l.readings.map(\.reading) == unread)
        }
    }

    /// A link that drops at any frame of a full memory's transfer: every slot whose bytes came
    /// in before is a reading, in order, although the rest of its user's ring never arrived
    /// (probe N: a ring read in several blocks gave nothing when a later block failed).
    @Test func aDropMidRingKeepsTheSlotsThatArrived() {
        for id in ["HEM-7142T2", "HEM-7361T", "HEM-9700T"] {
            let p = OmronCatalog.profile(named: id)!
            var whole = link(p, .fullMemory)
            #expect(whole.run() == .completed)
            let all = whole.readings
            let first = p.users[0].records
            var counts: [Int] = []
            for frame in 3...40 {
                var l = link(p, .fullMemory)
                l.cuff.dropArmed = true
                l.cuff.dropAtFrame = frame
                let outcome = l.run()
                if outcome == .completed { break }
                #expect(outcome == .disconnected)
                #expect(Array(all.prefix(l.readings.count)) == l.readings, "\(id) frame \(frame)")
                counts.append(l.readings.count)
            }
            #expect(counts == counts.sorted(), "\(id): \(counts)")
            #expect(counts.contains { $0 > 0 && $0 < first }, "\(id): part of user 1's ring: \(counts)")
        }
    }

    /// A cuff that refuses the clock write (status 0xE5): the records are read all the same, and
    /// marked read (probe N: exit 8, no reading, until --no-set-time).
    @Test func aRefusedClockWriteStillSyncs() {
        for id in ["HEM-7142T2", "HEM-7361T", "HEM-7386T1", "HEM-9700T"] {
            let p = OmronCatalog.profile(named: id)!
            var l = link(p)
            l.cuff.refuseClockWrites = 0xE5
            let unread = p.users.indices.flatMap { l.cuff.unreadReadings(user: $0) }
            #expect(l.run() == .completed, "\(id)")
            #expect(l.clockRefusals == [0xE5], "\(id)")
            #expect(l.readings.map(\.reading) == unread, "\(id)")
            #expect(l.again() == .completed)
            #expect(l.readings.isEmpty, "\(id): marked read")
        }
    }

    /// An all-zero reply to the pairing probe means the OS bond did not happen (omron.md §3.1,
    /// OB#3): said as the unencrypted link it is, not as a cuff out of pairing mode (probe N).
    @Test func anAllZeroPairingReplyIsTheMissingBond() {
        var s = OmronSession(
            profile: OmronCatalog.profile(named: "HEM-7322T")!, options: OmronSyncOptions(pair: true),
            localSeconds: localNow)
        _ = s.handle(.start, now: .zero)
        let a = s.handle(.notified(.unlock, [0x00, 0x00]), now: .milliseconds(10))
        #expect(a.contains(.finished(.linkNotEncrypted)), "\(a)")
    }

    @Test func refusedKeyLatchesUntilPowerCycled() {
        let p = OmronCatalog.profile(named: "HEM-7361T")!
        var l = link(p, .refusedKey)
        #expect(l.run() == .keyRefused(status: 0x01))
        #expect(l.readings.isEmpty)
        // Pairing anew is refused too while latched (not in pairing mode → no 82 00 either).
        _ = l.cuff.handle(.button, localSeconds: localNow)
        #expect(l.again(OmronSyncOptions(pair: true)) == .keyLatched(status: 0x01))
        _ = l.cuff.handle(.powerCycle, localSeconds: localNow)
        _ = l.cuff.handle(.button, localSeconds: localNow)
        #expect(l.again(OmronSyncOptions(pair: true)) == .completed)
        #expect(l.cuff.key == OmronSimulator.defaultKey)
        #expect(l.again() == .completed)
        #expect(!l.readings.isEmpty)
    }

    @Test func pairingVariants() {
        // Custom key: a factory-fresh cuff refuses to transfer, is not in pairing mode until its button.
        let k = OmronCatalog.profile(named: "HEM-7322T")!
        var l = link(k, .normal, paired: false)
        #expect(l.run() == .keyRefused(status: 0x01))
        #expect(l.again(OmronSyncOptions(pair: true)) == .notInPairingMode)
        _ = l.cuff.handle(.button, localSeconds: localNow)
        var custom = OmronSyncOptions(pair: true)
        custom.key = [UInt8](repeating: 0x42, count: 16)
        #expect(l.again(custom) == .completed)
        #expect(l.cuff.key == custom.key)
        #expect(l.again() == .keyRefused(status: 0x01), "the default key is now the wrong one")
        _ = l.cuff.handle(.powerCycle, localSeconds: localNow)
        var sync = OmronSyncOptions()
        sync.key = custom.key
        #expect(l.again(sync) == .completed)
        #expect(!l.readings.isEmpty)
        // Token: unpaired, nothing answers the token until pairing mode.
        let t = OmronCatalog.profile(named: "HEM-7142T2")!
        var m = link(t, .normal, paired: false)
        #expect(m.run() == .timedOut(what: "unlock"))
        _ = m.cuff.handle(.button, localSeconds: localNow)
        #expect(m.again(OmronSyncOptions(pair: true)) == .completed)
        #expect(m.again() == .completed)
        #expect(!m.readings.isEmpty)
        // The token echo carries our 4 bytes.
        #expect(m.trace.first { $0.0 == .unlock }?.1.prefix(5) == [0x11, 0x13, 0x57, 0x9B, 0xDF])
        // Bond only: nothing on the unlock characteristic.
        let b = OmronCatalog.profile(named: "HEM-7146T")!
        var n = link(b)
        #expect(n.run() == .completed)
        #expect(!n.trace.contains { $0.0 == .unlock })
    }

    @Test func badClockChecksumGivesE5AtEnd() {
        let p = OmronCatalog.profile(named: "HEM-7600T")!
        var cuff = OmronSimulator(profile: p, localSeconds: localNow)
        let rx: [OmronCharacteristic] = [.rx(0), .rx(1), .rx(2), .rx(3), .unlock]
        for c in rx { _ = cuff.handle(.subscribe(c), localSeconds: localNow) }
        _ = cuff.handle(.write(.unlock, [0x01] + OmronSimulator.defaultKey), localSeconds: localNow)
        func send(_ f: OmronFrame) -> OmronFrame? {
            var r = OmronReassembler(transport: .classic)
            var out: [UInt8]?
            for piece in OmronTransport.classic.split(f.encode()) {
                for case let .notify(.rx(ch), b) in cuff.handle(
                    .write(.tx(piece.channel), piece.bytes), localSeconds: localNow)
                {
                    out = (try? r.receive(channel: ch, b)) ?? out
                }
            }
            return out.flatMap { try? OmronFrame.decode($0) }
        }
        #expect(send(.start)?.type == 0x8000)
        var w = OmronClockCodec.encode(
            DateTime(unixSeconds: localNow), into: [UInt8](repeating: 0, count: 10), clock: p.clock)
        w[9] &+= 1
        #expect(send(.write(p.settingsWrite + 0x14, w))?.type == 0x81C0)
        #expect(send(.end)?.status == 0xE5)
        // A session whose reply never comes times out after its attempts.
    }

    @Test func timeoutsRetryThenGiveUp() {
        let p = OmronCatalog.profile(named: "HEM-7146T")!
        var s = OmronSession(profile: p, localSeconds: localNow)
        var writes = 0
        var now = Timestamp.zero
        var actions = s.handle(.start, now: now)
        var outcome: OmronSessionOutcome?
        while outcome == nil {
            var timer: Timestamp?
            for a in actions {
                if case .write = a { writes += 1 }
                if case let .setTimer(t) = a { timer = t }
                if case let .finished(o) = a { outcome = o }
            }
            guard let t = timer else { break }
            now = t
            actions = s.handle(.timer, now: now)
        }
        #expect(outcome == .timedOut(what: "start"))
        #expect(writes == 4)
        #expect(now == .seconds(20))
    }

    /// Replies that come but are refused (a bad XOR check, another address, short data) are
    /// retried as lost ones are; when the attempts run out the session says why the last was
    /// refused, not that none came.
    @Test func refusedRepliesAreSaidWhenTheAttemptsRunOut() {
        let p = OmronCatalog.profile(named: "HEM-7146T")!
        func outcome(_ corrupt: (inout [UInt8]) -> Void) -> OmronSessionOutcome? {
            var s = OmronSession(profile: p, localSeconds: localNow)
            var now = Timestamp.zero
            var actions = s.handle(.start, now: now)
            for _ in 0..<10 {
                var timer: Timestamp?
                for a in actions {
                    if case let .finished(o) = a { return o }
                    if case let .setTimer(t) = a { timer = t }
                }
                // Each start gets a reply, made wrong.
                var reply = OmronFrame(type: 0x8000, size: 0).encode()
                corrupt(&reply)
                for piece in p.transport.split(reply) {
                    for a in s.handle(.notified(.rx(piece.channel), piece.bytes), now: now) {
                        if case let .finished(o) = a { return o }
                    }
                }
                guard let t = timer else { return nil }
                now = t
                actions = s.handle(.timer, now: now)
            }
            return nil
        }
        let badXOR = outcome { $0[$0.count - 1] ^= 0x5A }
        guard case let .refusedReplies(what, last)? = badXOR else {
            Issue.record("\(String(describing: badXOR))")
            return
        }
        #expect(what == "start" && last.code == .badChecksum && last.offset == 7)
        let wrongType = outcome { b in
            b[2] = 0x01
            b[b.count - 1] = b.dropLast().reduce(0, ^)
        }
        guard case let .refusedReplies(_, typeError)? = wrongType else {
            Issue.record("\(String(describing: wrongType))")
            return
        }
        #expect(typeError.code == .unexpectedType)
    }
}

@Suite("Omron observer (replay)")
struct ObserverTests {
    /// Feeds `observer` the channel traffic of a live session of `p` (both directions, in order);
    /// returns the live readings, the observed ones, and the clock windows it reported.
    static func follow(_ p: OmronProfile, _ scenario: OmronScenario, _ observer: inout OmronObserver) -> (
        live: [OmronSyncedReading], seen: [OmronSyncedReading], clocks: Int
    ) {
        var l = link(p, scenario)
        var seen: [OmronSyncedReading] = []
        var clocks = 0
        // Re-run the session, feeding the observer both directions in order.
        var cuff = l.cuff
        var session = l.session
        var events: [OmronSession.Event] = [.start]
        var timer: Timestamp?
        var now = Timestamp.zero
        var done = false
        func observe(_ o: [OmronObserver.Output]) {
            for x in o {
                if case let .reading(r) = x { seen.append(r) }
                if case .clock = x { clocks += 1 }
            }
        }
        while !done {
            let e: OmronSession.Event
            if !events.isEmpty {
                e = events.removeFirst()
            } else if let t = timer {
                now = t; timer = nil; e = .timer
            } else {
                break
            }
            for a in session.handle(e, now: now) {
                switch a {
                case let .subscribe(c): _ = cuff.handle(.subscribe(c), localSeconds: localNow)
                case let .write(c, b):
                    observe(observer.written(c, b))
                    for case let .notify(ch, nb) in cuff.handle(.write(c, b), localSeconds: localNow) {
                        observe(observer.notified(ch, nb))
                        events.append(.notified(ch, nb))
                    }
                case let .setTimer(t): timer = t
                case .finished: done = true
                default: break
                }
            }
        }
        observe(observer.finish())
        #expect(l.run() == .completed)
        return (l.readings, seen, clocks)
    }

    /// The channel traffic of a live session, followed as a third party, gives the same readings
    /// in the same order, for every profile, also over a wrapped memory.
    @Test(arguments: OmronCatalog.profiles)
    func observerGivesTheLiveReadings(p: OmronProfile) {
        for scenario in [OmronScenario.normal, .fullMemory] {
            var observer = OmronObserver(profile: p)
            let r = Self.follow(p, scenario, &observer)
            #expect(r.seen == r.live, "\(p.id) \(scenario)")
            #expect(r.clocks == 1)
        }
    }

    /// Without the model (a capture with no model number read), the reads tell the map: every
    /// reading comes out, whichever profiles agree on the first slots (probe A2: a HEM-7361T
    /// capture settled on HEM-7150T, and user 2's readings were dropped: 60 of 200). (Where a
    /// one-user map covers both of the cuff's user areas, the user number can still be wrong:
    /// captures made since carry the model number, which names the map.)
    @Test(arguments: OmronCatalog.profiles.filter { $0.users.count > 1 })
    func anUnnamedModelGivesEveryReading(p: OmronProfile) {
        for scenario in [OmronScenario.normal, .fullMemory] {
            var observer = OmronObserver(transport: p.transport)
            let r = Self.follow(p, scenario, &observer)
            #expect(r.seen.count == r.live.count, "\(p.id) \(scenario): \(r.seen.count) of \(r.live.count)")
            #expect(r.seen.map(\.reading) == r.live.map(\.reading), "\(p.id) \(scenario)")
        }
    }
}
