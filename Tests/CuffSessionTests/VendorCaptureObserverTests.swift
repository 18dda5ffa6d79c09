import Testing
import BloodPressure
import CuffCore
import CuffSimulator
import GATT
@testable import CuffSession

/// `cuff replay` of Microlife and Yonker sessions: the observer follows a captured central's ATT
/// traffic (ours, or the vendor's app, which asks in its own order) and gives the live records.
@Suite("Vendor sessions followed in a capture")
struct VendorCaptureObserverTests {
    static let yonkerService = GATTProfile.Service(
        uuid: BluetoothUUID(Yonker.serviceUUID)!, handle: 30, endHandle: 33,
        characteristics: [
            GATTProfile.Characteristic(
                uuid: BluetoothUUID(Yonker.notifyUUID)!, properties: .notify, declarationHandle: 31, valueHandle: 32,
                cccdHandle: 33)
        ])

    static func records() -> [Microlife.Record?] {
        [
            VendorSessionTests.record(120, 80, 60, 2024, 6, 15, 14, 30), nil,
            VendorSessionTests.record(130, 85, 70, 2025, 1, 2, 3, 4),
            VendorSessionTests.record(118, 76, 64, 2025, 1, 3, 8, 15),
        ]
    }

    /// What the observer gave: readings (systolic/diastolic/pulse/time), the session records'
    /// events and outcomes, and its log lines.
    struct Given {
        var readings: [String] = []
        var sessions: [String] = []
        var logs: [String] = []

        mutating func take(_ out: [ObserverOutput]) {
            for o in out {
                switch o {
                case let .emit(.measurement(m)):
                    readings.append(
                        "\(m.systolic.doubleValue ?? -1)/\(m.diastolic.doubleValue ?? -1) \(m.timestamp ?? "-")")
                case let .emit(.session(s)): sessions.append("\(s.event)\(s.outcome.map { ":\($0.rawValue)" } ?? "")")
                case .emit: break
                case let .log(s), let .notice(s): logs.append(s)
                }
            }
        }
    }

    /// A central's download from a simulated Microlife cuff, as the capture holds it: the CCCD
    /// write, each command and its answer, the cuff's notifications. `setClock`: the central sets
    /// the cuff's clock first (ours does; the vendor's app need not).
    static func microlifeCapture(setClock: Bool, strayFirst: Bool = false) -> [(pdu: [UInt8], fromCentral: Bool)] {
        var cuff = MicrolifeCuff(slots: records())
        var pdus: [([UInt8], Bool)] = [([0x12, 23, 0, 0x01, 0x00], true), ([0x13], false)]
        cuff.subscriptionChanged(true)
        if strayFirst {
            // The same answer frame on a handle nobody subscribed to (the Device Name's).
            var other = MicrolifeCuff(slots: [VendorSessionTests.record(99, 60, 50, 2024, 1, 1, 1, 1)])
            other.subscriptionChanged(true)
            for case let .notify(n) in other.written(Microlife.getMeasurementsCommand) {
                pdus.append(([0x1B, 3, 0] + n, false))
            }
        }
        var commands = [Microlife.getMeasurementsCommand, Microlife.disconnectCommand]
        if setClock {
            commands.insert(
                Microlife.setTimeCommand(DateTime(year: 2025, month: 2, day: 1, hours: 9, minutes: 0, seconds: 0)),
                at: 0)
        }
        for c in commands {
            pdus.append(([0x12, 25, 0] + c, true))
            let answer = cuff.written(c)
            pdus.append(([0x13], false))
            for case let .notify(n) in answer { pdus.append(([0x1B, 22, 0] + n, false)) }
        }
        return pdus
    }

    static func follow(
        _ observer: inout VendorCaptureObserver, _ pdus: [(pdu: [UInt8], fromCentral: Bool)],
        disconnectAt: Double? = nil
    ) -> Given {
        var given = Given()
        var out: [ObserverOutput] = []
        observer.connected(at: t(0), into: &out)
        for (i, p) in pdus.enumerated() {
            observer.advance(to: t(Double(i + 1) * 0.01).monotonic, inclusive: false, into: &out)
            observer.pdu(p.pdu, fromCentral: p.fromCentral, at: t(Double(i + 1) * 0.01), into: &out)
        }
        if let d = disconnectAt { observer.disconnected(nil, at: t(d), into: &out) }
        given.take(out)
        return given
    }

    static func microlife() -> VendorCaptureObserver {
        VendorCaptureObserver(
            .microlife(MicrolifeSession(setTime: nil)),
            gatt: GATTProfile(services: [VendorRegistryTests.microlifeService()]),
            device: DeviceInfo(address: "AA:BB:CC:DD:EE:FF"))
    }

    @Test(arguments: [false, true])
    func aMicrolifeDownloadGivesItsReadingsWhetherOrNotTheClockWasSet(setClock: Bool) {
        var o = Self.microlife()
        let g = Self.follow(&o, Self.microlifeCapture(setClock: setClock), disconnectAt: 5)
        #expect(
            g.readings == [
                "120.0/80.0 2024-06-15T14:30:00", "130.0/85.0 2025-01-02T03:04:00", "118.0/76.0 2025-01-03T08:15:00",
            ])
        // One start, one end; the session ended with the goodbye's answer, as live.
        #expect(g.sessions == ["start", "end:completed"], "\(g.logs)")
        #expect(g.logs.contains("Microlife: download complete"))
        #expect(o.isFinished && o.measurements == 3 && o.deadline == nil)
    }

    /// A frame on a handle the session did not subscribe to is not its cuff's answer (as live).
    @Test func aNotificationOfAnotherHandleIsNotTaken() {
        var o = Self.microlife()
        let g = Self.follow(&o, Self.microlifeCapture(setClock: false, strayFirst: true), disconnectAt: 5)
        #expect(g.readings.count == 3)
        #expect(!g.readings.contains { $0.hasPrefix("99.0/") })
        #expect(g.logs.filter { $0.contains("handle 0x0003, which was not subscribed") }.count == 1, "\(g.logs)")
    }

    /// A capture that ends before the cuff answered: the live session's answer window runs out at
    /// the capture's clock (10 s), and the session says so.
    @Test func aCaptureWithoutTheAnswerTimesOutAsLive() {
        var o = Self.microlife()
        let pdus = Array(Self.microlifeCapture(setClock: false).prefix(4))  // CCCD, the ask, its answer
        var g = Self.follow(&o, pdus)
        #expect(o.deadline != nil)
        var out: [ObserverOutput] = []
        o.advance(to: t(30).monotonic, inclusive: true, into: &out)
        g.take(out)
        #expect(g.sessions == ["start", "end:timed_out"], "\(g.logs)")
        #expect(g.readings.isEmpty)
    }

    /// Every prefix of every PDU of the download (a capture cut anywhere, a lying peer), and
    /// the download with each PDU dropped in turn: no crash, no reading that was not sent, and
    /// always exactly one end record once the link goes down.
    @Test func everyTruncationAndEveryDroppedPDU() {
        let pdus = Self.microlifeCapture(setClock: true)
        var whole = Self.microlife()
        let sent = Set(Self.follow(&whole, pdus, disconnectAt: 5).readings)
        #expect(sent.count == 3)
        for i in pdus.indices {
            for n in 0..<pdus[i].pdu.count {
                var cut = pdus
                cut[i].pdu = Array(cut[i].pdu.prefix(n))
                var o = Self.microlife()
                let g = Self.follow(&o, cut, disconnectAt: 5)
                #expect(Set(g.readings).isSubset(of: sent))
                #expect(g.sessions.filter { $0.hasPrefix("end") }.count == 1)
            }
            var dropped = pdus
            dropped.remove(at: i)
            var o = Self.microlife()
            let g = Self.follow(&o, dropped, disconnectAt: 5)
            #expect(Set(g.readings).isSubset(of: sent))
            #expect(g.sessions.first == "start" && g.sessions.filter { $0.hasPrefix("end") }.count == 1)
        }
    }

    /// A Yonker result: given at once, and the session ends when the settle window closes (2 s
    /// after the first result), before the link goes down.
    @Test func aYonkerResultEndsTheSessionAfterTheSettleWindow() {
        var o = VendorCaptureObserver(
            .yonker(YonkerSession(settle: .seconds(2))), gatt: GATTProfile(services: [Self.yonkerService]),
            device: DeviceInfo(address: "AA:BB:CC:DD:EE:FF"))
        let result = Yonker.Result(
            systolic: 131, diastolic: 103, pulse: 81,
            time: DateTime(year: 2024, month: 11, day: 25, hours: 19, minutes: 18, seconds: 0))
        let pdus: [([UInt8], Bool)] = [
            ([0x12, 33, 0, 0x01, 0x00], true), ([0x13], false),
            ([0x1B, 32, 0, 0x82] + [UInt8](repeating: 0, count: 14), false),
            ([0x1B, 32, 0] + result.bytes, false),
        ]
        var g = Self.follow(&o, pdus)
        #expect(g.readings == ["131.0/103.0 2024-11-25T19:18:00"])
        #expect(g.sessions == ["start"])
        #expect(o.deadline == t(0.04 + 2).monotonic)
        var out: [ObserverOutput] = []
        o.advance(to: t(10).monotonic, inclusive: true, into: &out)
        o.disconnected(nil, at: t(10), into: &out)
        g.take(out)
        #expect(g.sessions == ["start", "end:completed"], "\(g.logs)")
        #expect(g.logs.contains("Yonker: result received"))
    }
}
