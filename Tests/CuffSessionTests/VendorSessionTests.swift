import Testing
import BloodPressure
import CuffCore
import CuffSimulator
import GATT
@testable import CuffSession

/// The Microlife and Yonker sessions against their simulated cuffs, in process (each side a pure
/// state machine; the actions of one are the events of the other).
@Suite("Vendor-protocol sessions ↔ personas")
struct VendorSessionTests {
    static func record(
        _ s: UInt8, _ d: UInt8, _ p: UInt8, _ y: UInt16, _ mo: UInt8, _ da: UInt8, _ h: UInt8, _ mi: UInt8
    ) -> Microlife.Record {
        Microlife.Record(
            systolic: s, diastolic: d, pulse: p,
            time: DateTime(year: y, month: mo, day: da, hours: h, minutes: mi, seconds: 0))
    }

    /// Runs the session against the cuff until it finishes; returns the readings and the outcome.
    static func run(_ cuff: inout MicrolifeCuff, setTime: Int64?) -> (
        readings: [VendorReading], outcome: SessionOutcome?, notifications: Int
    ) {
        var s = MicrolifeSession(setTime: setTime)
        var readings: [VendorReading] = []
        var outcome: SessionOutcome?
        var notifications = 0
        var clock = 0.0
        var queue = s.handle(.start(t(0)))
        while !queue.isEmpty, outcome == nil {
            let a = queue.removeFirst()
            clock += 0.01
            switch a {
            case let .subscribe(u):
                #expect(u == "FFF1")
                cuff.subscriptionChanged(true)
                queue += s.handle(.subscribed(t(clock)))
            case let .write(u, v):
                #expect(u == "FFF2")
                let answer = cuff.written(v)
                queue += s.handle(.writeCompleted(t(clock)))
                for x in answer {
                    switch x {
                    case let .notify(n): notifications += 1; queue += s.handle(.notification(n, t(clock)))
                    case .disconnect: queue += s.handle(.disconnected(t(clock)))
                    case .log: break
                    }
                }
            case let .emit(r): readings.append(r)
            case let .finished(o): outcome = o
            case .log, .disconnect: break
            }
        }
        return (readings, outcome, notifications)
    }

    @Test func microlifeDownload() {
        var cuff = MicrolifeCuff(slots: [
            Self.record(120, 80, 60, 2024, 6, 15, 14, 30), nil, Self.record(110, 70, 65, 2024, 0, 15, 14, 30),
            Self.record(130, 85, 70, 2025, 1, 2, 3, 4),
        ])
        let r = Self.run(&cuff, setTime: 1_767_254_400)  // 2026-01-01T08:00:00
        #expect(r.readings.map(\.systolic) == [120, 130])
        #expect(r.readings.map(\.timestamp) == ["2024-06-15T14:30:00", "2025-01-02T03:04:00"])
        #expect(r.readings.allSatisfy { $0.stored && $0.protocolName == "microlife" })
        #expect(r.outcome == .completed)
        #expect(cuff.clock == DateTime(year: 2026, month: 1, day: 1, hours: 8, minutes: 0, seconds: 0))
        // 4 + 38 + 40 + 1 = 83 bytes in 20-byte notifications, plus the clock's acknowledgement.
        #expect(r.notifications == 5 + 1)
    }

    @Test func microlifeWithoutClockAndWithBigNotifications() {
        var cuff = MicrolifeCuff(slots: [Self.record(141, 91, 77, 2026, 3, 1, 7, 5)], chunk: 244)
        let r = Self.run(&cuff, setTime: nil)
        #expect(r.readings.map(\.pulse) == [77])
        #expect(cuff.clock == nil)
        #expect(r.notifications == 1)
        #expect(r.outcome == .completed)
    }

    @Test func microlifeSilentCuffTimesOut() {
        var s = MicrolifeSession(setTime: nil, answerWindow: .seconds(10))
        _ = s.handle(.start(t(0)))
        _ = s.handle(.subscribed(t(0.1)))
        // Half a frame, then nothing.
        _ = s.handle(.notification([0x4D, 0x3A, 0x00, 0x40, 0x00], t(0.2)))
        #expect(s.handle(.tick(t(5))).isEmpty)
        let a = s.handle(.tick(t(10.2)))
        #expect(a.contains(.finished(.timedOut)) && a.contains(.disconnect))
    }

    @Test func microlifeBadFramesAreIgnored() {
        var s = MicrolifeSession(setTime: nil)
        _ = s.handle(.start(t(0)))
        _ = s.handle(.subscribed(t(0.1)))
        let bad = s.handle(.notification([0x4D, 0x3A, 0x00, 0x02, 0x81, 0x0B], t(0.2)))  // wrong checksum
        #expect(bad.contains { if case let .log(l) = $0 { l.contains("Checksum") } else { false } })
        #expect(s.readings == 0)
        let junk = s.handle(.notification([0x01, 0x02], t(0.3)))
        #expect(junk.contains { if case let .log(l) = $0 { l.contains("outside a frame") } else { false } })
        // No good frame follows: a protocol error naming the bad frame, not a timeout (probe O).
        let end = s.handle(.tick(t(20)))
        #expect(end.contains(.finished(.protocolError)) && end.contains(.disconnect), "\(end)")
    }

    @Test func yonkerResult() {
        var cuff = YonkerCuff(
            result: Yonker.Result(
                systolic: 131, diastolic: 103, pulse: 81,
                time: DateTime(year: 2024, month: 11, day: 25, hours: 19, minutes: 18, seconds: 0)))
        var s = YonkerSession(settle: .seconds(2))
        #expect(s.handle(.start(t(0))) == [.subscribe("CDEACD81-5235-4C07-8846-93A37EE6B86D")])
        _ = s.handle(.subscribed(t(0.1)))
        // A progress notification (byte 0 not 0x81) first, then the cuff's result.
        let progress = s.handle(.notification([0x82] + [UInt8](repeating: 0, count: 14), t(0.15)))
        #expect(progress.count == 1)
        var out: [YonkerSession.Action] = []
        for a in cuff.subscriptionChanged(true) {
            if case let .notify(v) = a { out += s.handle(.notification(v, t(0.2))) }
        }
        let readings = out.compactMap { if case let .emit(r) = $0 { r } else { nil } }
        #expect(readings.count == 1)
        #expect(readings.first.map { ($0.systolic, $0.diastolic, $0.pulse) } ?? (0, 0, 0) == (131, 103, 81))
        #expect(readings.first?.timestamp == "2024-11-25T19:18:00")
        #expect(readings.first?.stored == false)
        #expect(s.nextDeadline == t(2.2).monotonic)
        #expect(s.handle(.tick(t(1))).isEmpty)
        #expect(s.handle(.tick(t(2.2))).contains(.finished(.completed)))
    }

    /// A cuff that sends a new result every second: the settle window opens with the first and
    /// is not moved by later ones, so the session ends 2 s after the first (probe V: it ran on
    /// past `--timeout`, one reading a second).
    @Test func yonkerResultsThatKeepComingDoNotHoldTheSession() {
        var s = YonkerSession(timeout: .seconds(15), settle: .seconds(2))
        _ = s.handle(.start(t(0)))
        _ = s.handle(.subscribed(t(0.1)))
        var readings = 0
        var ended: (SessionOutcome, Double)?
        var clock = 1.0
        while ended == nil, clock < 60 {
            for a in s.handle(.tick(t(clock))) { if case let .finished(o) = a { ended = (o, clock) } }
            if ended == nil, clock == clock.rounded() {
                let r = Yonker.Result(
                    systolic: UInt8(100 + Int(clock)), diastolic: 70, pulse: 60,
                    time: DateTime(year: 2025, month: 3, day: 4, hours: 5, minutes: 6, seconds: 0))
                for a in s.handle(.notification(r.bytes, t(clock))) { if case .emit = a { readings += 1 } }
            }
            clock += 0.5
        }
        #expect(ended?.0 == .completed)
        #expect(ended?.1 == 3, "ended at \(ended?.1 ?? -1) s")
        #expect(readings == 2)
    }

    /// A reading's record says what is wrong with it (probe V: 0/0 pulse 0 and a date of
    /// 2025-13-00 25:60 went out with `"warnings":[]`), by field, never by value.
    @Test func aVendorReadingSaysWhatIsWrongWithIt() throws {
        func reading(_ s: UInt8, _ d: UInt8, _ p: UInt8, time: String?) -> VendorReading {
            VendorReading(
                protocolName: "yonker", systolic: s, diastolic: d, pulse: p, timestamp: time, stored: false, raw: [])
        }
        let fine = reading(131, 103, 81, time: "2024-11-25T19:18:00")
        #expect(fine.warnings.isEmpty)
        let zero = reading(0, 0, 0, time: "2024-11-25T19:18:00")
        #expect(zero.warnings.map(\.message) == ["Systolic is zero", "Diastolic is zero", "Pulse Rate is zero"])
        let inverted = reading(40, 250, 1, time: nil)
        #expect(inverted.warnings.map(\.code) == [.invalidDateTime, .implausibleValue])
        let record = inverted.record(device: DeviceInfo(address: "unix:/test"), at: t(1))
        #expect(record.warnings == inverted.warnings)
        let line = record.json.serialized()
        #expect(
            line.contains(#""code":"invalid_date_time""#) && line.contains("Systolic is not above Diastolic"), "\(line)"
        )
        // Through the session: the bad date reaches the record, not only stderr.
        var s = YonkerSession(settle: .seconds(1))
        _ = s.handle(.start(t(0)))
        _ = s.handle(.subscribed(t(0.1)))
        let bytes: [UInt8] = [0x81, 0x83, 0x67, 0x51, 0x00, 0x00, 0x00, 0x0D, 0x19, 0x19, 0x3C, 0x00, 0x00, 0x00, 0x00]
        let emitted = s.handle(.notification(bytes, t(1))).compactMap { if case let .emit(r) = $0 { r } else { nil } }
        #expect(emitted.first?.warnings.map(\.code) == [.invalidDateTime])
    }

    @Test func yonkerNothingBeforeTheTimeout() {
        var s = YonkerSession(timeout: .seconds(30))
        _ = s.handle(.start(t(0)))
        _ = s.handle(.subscribed(t(0.1)))
        #expect(s.handle(.notification([0x81, 0x83], t(1))).count == 1)  // truncated: said, ignored
        #expect(s.handle(.tick(t(30))).contains(.finished(.timedOut)))
    }
}

/// The vendor sessions over real ATT: ``VendorCentral`` (a GATT client) and
/// ``VendorCuffPeripheral`` (a GATT server) exchanging PDUs in process, discovery included.
@Suite("Vendor-protocol sessions over ATT")
struct VendorATTTests {
    struct Run {
        var readings: [VendorReading] = []
        var outcome: SessionOutcome?
        var logs: [String] = []
        var pdus = 0
    }

    /// `rewrite`: what the central gets for each PDU the cuff sends (a hostile link).
    static func run(
        _ central: inout VendorCentral, _ cuff: inout VendorCuffPeripheral,
        rewrite: ([UInt8]) -> [[UInt8]] = { [$0] }
    ) -> Run {
        var r = Run()
        var clock = 0.0
        _ = cuff.connected(now: t(0).monotonic, client: nil)
        var toCuff: [[UInt8]] = []
        var toCentral: [[UInt8]] = []
        func take(_ out: [VendorCentral.Output]) {
            for o in out {
                switch o {
                case let .send(p): toCuff.append(p)
                case let .emit(x): r.readings.append(x)
                case let .log(s): r.logs.append(s)
                case .disconnect, .raiseSecurity, .measurement: break
                case let .finished(o): r.outcome = o
                }
            }
        }
        take(central.start(at: t(0)))
        var steps = 0
        while r.outcome == nil, steps < 10_000 {
            steps += 1
            clock += 0.005
            if !toCuff.isEmpty {
                r.pdus += 1
                for o in cuff.receive(toCuff.removeFirst(), now: t(clock).monotonic) {
                    switch o {
                    case let .send(p): toCentral += rewrite(p)
                    case .disconnect: take(central.disconnected(at: t(clock)))
                    case let .log(s): r.logs.append(s)
                    }
                }
            } else if !toCentral.isEmpty {
                r.pdus += 1
                take(central.receive(toCentral.removeFirst(), at: t(clock)))
            } else {
                clock += 1
                take(central.tick(at: t(clock)))
            }
        }
        return r
    }

    @Test func microlifeDownloadOverATT() {
        let slots: [Microlife.Record?] = [
            VendorSessionTests.record(120, 80, 60, 2024, 6, 15, 14, 30), nil,
            VendorSessionTests.record(130, 85, 70, 2025, 1, 2, 3, 4),
        ]
        var cuff = VendorCuffPeripheral(.microlife(MicrolifeCuff(slots: slots)), name: "BP3GY1-2N")
        var central = VendorCentral(.microlife(MicrolifeSession(setTime: 1_767_254_400)))
        let r = Self.run(&central, &cuff)
        #expect(
            r.readings.map { "\($0.systolic)/\($0.diastolic) \($0.pulse) \($0.timestamp ?? "-")" } == [
                "120/80 60 2024-06-15T14:30:00", "130/85 70 2025-01-02T03:04:00",
            ])
        #expect(r.outcome == .completed, "\(r.logs)")
        #expect(r.logs.contains("Microlife cuff: goodbye"))
        if case let .microlife(c) = cuff.kind { #expect(c.clock?.year == 2026) }
    }

    @Test func yonkerResultOverATT() {
        let result = Yonker.Result(
            systolic: 131, diastolic: 103, pulse: 81,
            time: DateTime(year: 2024, month: 11, day: 25, hours: 19, minutes: 18, seconds: 0))
        var cuff = VendorCuffPeripheral(.yonker(YonkerCuff(result: result)), name: "YK-IBPA1")
        var central = VendorCentral(.yonker(YonkerSession(settle: .seconds(1))))
        let r = Self.run(&central, &cuff)
        #expect(r.readings.count == 1)
        #expect(r.readings.first?.raw == result.bytes)
        #expect(r.outcome == .completed, "\(r.logs)")
    }

    /// A notification from a handle the session did not subscribe to (here the Device Name's,
    /// 0x0003) is not the cuff's answer, however well it decodes: left out, said once.
    @Test func aNotificationFromAnotherHandleIsNotTaken() {
        let result = Yonker.Result(
            systolic: 131, diastolic: 103, pulse: 81,
            time: DateTime(year: 2024, month: 11, day: 25, hours: 19, minutes: 18, seconds: 0))
        var forged = result
        forged.systolic = 99
        var cuff = VendorCuffPeripheral(.yonker(YonkerCuff(result: result)), name: "YK-IBPA1")
        var central = VendorCentral(.yonker(YonkerSession(settle: .seconds(1))))
        let r = Self.run(&central, &cuff) { pdu in
            guard pdu.first == 0x1B else { return [pdu] }
            return [[0x1B, 0x03, 0x00] + forged.bytes, [0x1B, 0x03, 0x00] + forged.bytes, pdu]
        }
        #expect(r.readings.map(\.systolic) == [131])
        #expect(r.logs.filter { $0.contains("ignored a notification of handle 0x0003") }.count == 1, "\(r.logs)")
        #expect(r.outcome == .completed)
    }

    /// `--timeout` bounds a vendor session whatever the stage: a Microlife cuff whose answer
    /// trickles in, a notification every 4 s, is given up at a 5 s limit (before the session's
    /// own 10 s answer window); in time, the same cuff is not touched by it.
    @Test(arguments: [4.0, 0.0])
    func aTricklingAnswerIsBoundByTheTimeLimit(delay: Double) {
        // A hundred records: an answer of several notifications.
        let slots = (0..<100).map {
            VendorSessionTests.record(120, 80, 60, 2024, 6, UInt8(1 + $0 / 24), UInt8($0 % 24), 30)
        }
        var cuff = VendorCuffPeripheral(.microlife(MicrolifeCuff(slots: slots)), name: "BP3GY1-2N")
        var c = CuffSessionConfiguration(address: "unix:/test")
        c.timeout = .seconds(5)
        c.setTime = false
        var session = MicrolifeProtocol().makeCentral(configuration: c)
        var clock = 0.0
        var toCuff: [[UInt8]] = []
        var toCentral: [(at: Double, pdu: [UInt8])] = []
        var readings = 0
        var ended: (outcome: SessionOutcome, at: Double, why: String?)?
        func take(_ out: [CentralAction]) {
            for o in out {
                switch o {
                case let .send(p): toCuff.append(p)
                case .emit(.measurement): readings += 1
                case let .emit(.session(r)) where r.event == .end: ended = (r.outcome ?? .noResult, clock, r.message)
                default: break
                }
            }
        }
        _ = cuff.connected(now: t(0).monotonic, client: nil)
        var out: [CentralAction] = []
        session.start(at: t(0), into: &out)
        take(out)
        for _ in 0..<10_000 where ended == nil {
            out.removeAll()
            if !toCuff.isEmpty {
                for o in cuff.receive(toCuff.removeFirst(), now: t(clock).monotonic) {
                    // Each notification `delay` after the one before it.
                    let after = max(clock, toCentral.last?.at ?? clock)
                    if case let .send(p) = o { toCentral.append((after + (p.first == 0x1B ? delay : 0), p)) }
                }
                continue
            }
            let due = session.nextDeadline.map { Double($0.nanoseconds) / 1e9 }
            if let next = toCentral.first, due.map({ next.at <= $0 }) ?? true {
                clock = max(clock, next.at)
                toCentral.removeFirst()
                session.receive(next.pdu, at: t(clock), into: &out)
            } else if let due {
                clock = max(clock, due)
                session.tick(at: t(clock), into: &out)
            } else {
                break
            }
            take(out)
        }
        if delay > 0 {
            #expect(ended?.outcome == .timedOut)
            #expect(ended?.at == 5)
            #expect(ended?.why == "no result within 5.0 s")
            #expect(readings == 0)
        } else {
            #expect(ended?.outcome == .completed)
            #expect(readings == 100)
        }
    }

    /// The wrong cuff for the session: the vendor characteristic is missing; the session says so,
    /// and ends as the standard and Omron sessions do on a device without their service (7).
    @Test func missingCharacteristic() {
        let result = Yonker.Result(
            systolic: 131, diastolic: 103, pulse: 81,
            time: DateTime(year: 2024, month: 11, day: 25, hours: 19, minutes: 18, seconds: 0))
        var cuff = VendorCuffPeripheral(.yonker(YonkerCuff(result: result)), name: "YK-IBPA1")
        var central = VendorCentral(.microlife(MicrolifeSession(setTime: nil)))
        let r = Self.run(&central, &cuff)
        #expect(r.outcome == .serviceMissing)
        #expect(
            r.logs.contains { $0.contains("no Microlife service on this device (no characteristic FFF1)") }, "\(r.logs)"
        )
    }
}

/// How the registry picks the vendor protocols (and keeps a standard cuff with the standard session).
@Suite("Vendor protocols in the registry")
struct VendorRegistryTests {
    static func microlifeService() -> GATTProfile.Service {
        GATTProfile.Service(
            uuid: BluetoothUUID(0xFFF0), handle: 20, endHandle: 26,
            characteristics: [
                GATTProfile.Characteristic(
                    uuid: BluetoothUUID(0xFFF1), properties: .notify, declarationHandle: 21, valueHandle: 22,
                    cccdHandle: 23),
                GATTProfile.Characteristic(
                    uuid: BluetoothUUID(0xFFF2), properties: .write, declarationHandle: 24, valueHandle: 25),
            ])
    }

    @Test func choices() {
        let r = CuffProtocolRegistry.builtIn
        let bps = GATTProfile.Service(uuid: BluetoothUUID(0x1810), handle: 1, endHandle: 10)
        let yonker = GATTProfile.Service(uuid: BluetoothUUID(Yonker.serviceUUID)!, handle: 30, endHandle: 33)
        #expect(
            r.handOver(from: .bps, DeviceOffer(profile: GATTProfile(services: [Self.microlifeService()])))?.id
                == "microlife")
        #expect(r.handOver(from: .bps, DeviceOffer(profile: GATTProfile(services: [yonker])))?.id == "yonker")
        // A standard cuff that also has an fff0 service stays with the standard session.
        #expect(
            r.handOver(from: .bps, DeviceOffer(profile: GATTProfile(services: [bps, Self.microlifeService()]))) == nil)
        // An fff0 service without the Microlife characteristics is nobody's.
        #expect(
            r.handOver(
                from: .bps,
                DeviceOffer(
                    profile: GATTProfile(services: [
                        GATTProfile.Service(uuid: BluetoothUUID(0xFFF0), handle: 1, endHandle: 3)
                    ]))) == nil)
        #expect(r.select(DeviceOffer(name: "BP3GY1-2N")).id == "microlife")
        #expect(r.select(DeviceOffer(name: "YK-IBPA1")).id == "yonker")
        #expect(r.select(DeviceOffer(advertisedServices: [BluetoothUUID(Yonker.serviceUUID)!])).id == "yonker")
        #expect(r.select(DeviceOffer(name: "X4 Smart", advertisedServices: [BluetoothUUID(0x1810)])).id == .bps)
        #expect(r.select(DeviceOffer(name: "cuff-sim")).id == .bps)
    }
}

@Suite("Vendor readings rebuilt from a store's raw bytes")
struct VendorRebuildTests {
    @Test func roundTrips() {
        let m = VendorReading.rebuild(protocolName: "microlife", raw: [120, 80, 60, 24, 6, 15, 14, 30], stored: true)
        #expect(
            m
                == VendorReading(
                    protocolName: "microlife", systolic: 120, diastolic: 80, pulse: 60,
                    timestamp: "2024-06-15T14:30:00", stored: true, raw: [120, 80, 60, 24, 6, 15, 14, 30]))
        let y: [UInt8] = [0x81, 0x83, 0x67, 0x51, 0, 0, 0x19, 0x0B, 0x18, 0x13, 0x12, 0, 0, 0, 0]
        #expect(
            VendorReading.rebuild(protocolName: "yonker", raw: y, stored: false)?.timestamp == "2024-11-25T19:18:00")
        // Not a reading: wrong length, an empty slot, an impossible date, progress, another name.
        #expect(VendorReading.rebuild(protocolName: "microlife", raw: [120, 80, 60], stored: true) == nil)
        #expect(
            VendorReading.rebuild(protocolName: "microlife", raw: [0, 0, 0, 24, 6, 15, 14, 30], stored: true) == nil)
        #expect(
            VendorReading.rebuild(protocolName: "microlife", raw: [120, 80, 60, 24, 13, 15, 14, 30], stored: true)
                == nil)
        #expect(VendorReading.rebuild(protocolName: "yonker", raw: [0x82] + y.dropFirst(), stored: false) == nil)
        #expect(VendorReading.rebuild(protocolName: "omron", raw: y, stored: false) == nil)
    }
}
