import BloodPressure
import CuffCore
import CuffSession
import CuffSimulator
import GATT
import Testing
@testable import Omron

/// OmronCentral ↔ OmronPeripheral joined PDU by PDU in process, on a virtual clock.
struct GATTLink {
    var central: OmronCentral
    var peripheral: OmronPeripheral
    var now = Timestamp.zero
    var records: [SessionOutput] = []
    var outcome: SessionOutcome?
    var pdus = 0

    init(_ p: OmronProfile, peripheral: OmronPeripheral, options: OmronSyncOptions = OmronSyncOptions(), localSeconds: Int64 = localNow) {
        central = OmronCentral(profile: p, options: options, device: DeviceInfo(address: "unix:/test"), utcOffsetSeconds: localSeconds - 1_795_622_400)
        self.peripheral = peripheral
    }

    var at: EventTime { EventTime(monotonic: now, wallMicros: 1_795_622_400_000_000 + now.nanoseconds / 1000) }

    mutating func run() -> SessionOutcome? {
        _ = peripheral.connected(now: now, client: nil)
        var toPeripheral: [[UInt8]] = []
        var toCentral: [[UInt8]] = []
        func take(_ out: [CuffCentral.Output], _ link: inout GATTLink, _ q: inout [[UInt8]]) -> Bool {
            var dropped = false
            for o in out {
                switch o {
                case let .send(pdu): q.append(pdu)
                case let .emit(r): link.records.append(r)
                case let .finished(o): link.outcome = o
                case .disconnect: dropped = true
                case .raiseSecurity, .log: break
                }
            }
            return dropped
        }
        var down = take(central.start(at: at), &self, &toPeripheral)
        for _ in 0 ..< 2_000_000 where outcome == nil {
            if down {
                _ = peripheral.disconnected(now: now)
                _ = take(central.disconnected("closed", at: at), &self, &toPeripheral)
                break
            }
            if !toPeripheral.isEmpty {
                pdus += 1
                for o in peripheral.receive(toPeripheral.removeFirst(), now: now) {
                    switch o {
                    case let .send(pdu): toCentral.append(pdu)
                    case .disconnect: down = true
                    case .log: break
                    }
                }
            } else if !toCentral.isEmpty {
                pdus += 1
                down = take(central.receive(toCentral.removeFirst(), at: at), &self, &toPeripheral) || down
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
    var end: SessionRecord? { records.compactMap { if case let .session(s) = $0, s.event == .end { s } else { nil } }.last }
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

    @Test func wrongTransportIsServiceMissing() {
        let modern = OmronCatalog.profile(named: "HEM-7142T2")!
        let classic = OmronCatalog.profile(named: "HEM-7361T")!
        var l = GATTLink(classic, peripheral: OmronPeripheral(cuff: OmronSimulator(profile: modern, localSeconds: localNow), localAtPowerOn: localNow))
        #expect(l.run() == .serviceMissing)
        #expect(l.end?.message?.contains("modern") == true)
    }

    @Test func refusedKeyAndDroppedLinkOverATT() {
        let p = OmronCatalog.profile(named: "HEM-7600T")!
        var r = GATTLink(p, peripheral: OmronPeripheral(cuff: OmronSimulator(profile: p, scenario: .refusedKey, localSeconds: localNow), localAtPowerOn: localNow))
        #expect(r.run() == .securityRefused)
        #expect(r.end?.message?.contains("refused the key") == true)
        var d = GATTLink(p, peripheral: OmronPeripheral(cuff: OmronSimulator(profile: p, scenario: .droppedLink, localSeconds: localNow), localAtPowerOn: localNow))
        #expect(d.run() == .disconnected)
    }
}
