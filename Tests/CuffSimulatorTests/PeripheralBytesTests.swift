import Testing
import BloodPressure
import CuffCore
@testable import CuffSimulator
import GATT
import Omron

/// The simulated cuff's exact answers to hand-written request PDUs.
@Suite("Simulated cuff, byte for byte")
struct PeripheralBytesTests {
    func hx(_ s: String) -> [UInt8] { Hex.decode(s)! }
    func sent(_ out: [CuffPeripheral.Output]) -> [String] {
        out.compactMap { if case let .send(p) = $0 { Hex.encode(p) } else { nil } }
    }

    func peripheral(_ scenario: Scenario = .normal, persona: Persona = .bps10, autostart: Bool = false)
        -> CuffPeripheral
    {
        var p = CuffPeripheral(
            configuration: SimulatorConfiguration(scenario: scenario, persona: persona, seed: 3, autostart: autostart))
        _ = p.connected(now: .zero)
        return p
    }

    /// At --speed 6 the cuff's clock runs 6 times faster than the client's: the ATT transaction
    /// timeout stays 30 real seconds, 180 s of the cuff's time; slower than real time keeps 30 s.
    @Test func transactionTimeoutIsTheClientsRealTime() {
        var c = SimulatorConfiguration()
        #expect(CuffPeripheral(configuration: c).server.transactionTimeoutHere == .seconds(30))
        c.timeScale = 6
        #expect(CuffPeripheral(configuration: c).server.transactionTimeoutHere == .seconds(180))
        #expect(
            OmronPeripheral(
                configuration: {
                    var o = c; o.omron = OmronSimulation(profile: OmronCatalog.profile(named: "HEM-7361T")!); return o
                }())?.server.transactionTimeoutHere == .seconds(180))
        c.timeScale = 0.5
        #expect(c.transactionTimeout == .seconds(30))
        c.timeScale = .nan
        #expect(c.transactionTimeout == .seconds(30))
    }

    @Test func primaryServicesAndHandles() {
        var p = peripheral()
        // Exchange MTU 247 → server MTU 247.
        #expect(sent(p.receive(hx("02 F7 00"), now: .zero)) == ["03f700"])
        // Read By Group Type (primary service) over everything: GAP, BPS, DIS, CTS as 16-bit groups.
        #expect(
            sent(p.receive(hx("10 01 00 FF FF 00 28"), now: .zero)) == [
                "110601000300001804000c0010180d0015000a18160019000518"
            ])
        // The next range starts after CTS: the vendor service with its 128-bit UUID.
        #expect(
            sent(p.receive(hx("10 1A 00 FF FF 00 28"), now: .zero)) == [
                "11141a001c00f1c0000000000080004d49536666756 3".replacingOccurrences(of: " ", with: "")
            ])
        // Past the end: Attribute Not Found.
        #expect(sent(p.receive(hx("10 1D 00 FF FF 00 28"), now: .zero)) == ["01101d000a"])
        #expect(p.handles[.bloodPressureMeasurement] == 6)
        #expect(p.handles[.intermediateCuffPressure] == 9)
        #expect(p.handles[.bloodPressureFeature] == 12)
    }

    @Test func readsAndWrites() {
        var p = peripheral(.beurerBM85)
        #expect(sent(p.receive(hx("0A 0C 00"), now: .zero)) == ["0b3f00"])  // Feature: all BPS 1.0 bits
        #expect(sent(p.receive(hx("0A 11 00"), now: .zero)) == ["0b" + Hex.encode(Array("BM85".utf8))])  // model number
        // CCCD write with 3 bytes → Invalid Attribute Value Length.
        #expect(sent(p.receive(hx("12 07 00 02 00 00"), now: .zero)) == ["011207000d"])
        // Writing the (indicate-only) measurement value → Write Not Permitted.
        #expect(
            sent(p.receive(hx("12 06 00 01"), now: .zero)) == ["011206000 3".replacingOccurrences(of: " ", with: "")])
        // Unknown control command → application error 0x80; start → Write Response.
        let control = p.handles[.cuffControl]!
        let lo = String(format2(control & 0xFF)), hi = String(format2(control >> 8))
        #expect(sent(p.receive(hx("12 \(lo) \(hi) 07"), now: .zero)) == ["0112\(lo)\(hi)80"])
        #expect(sent(p.receive(hx("12 \(lo) \(hi) 01"), now: .zero)) == ["13"])
        #expect(p.machine.isMeasuring)
        // Malformed request (Read Request without a handle) → Invalid PDU.
        #expect(sent(p.receive(hx("0A 01"), now: .zero)) == ["010a000004"])
    }

    @Test func subscribeThenMeasurementNotifiesAndIndicates() {
        var p = peripheral(.normal, autostart: true)
        #expect(sent(p.receive(hx("12 0A 00 01 00"), now: .zero)) == ["13"])  // ICP notify on
        #expect(sent(p.receive(hx("12 07 00 02 00"), now: .zero)) == ["13"])  // BPM indicate on → autostart
        var t = Timestamp.zero
        var notifications = 0
        var indication: [UInt8]?
        while t < .seconds(120), indication == nil {
            for case let .send(pdu) in p.tick(now: t) {
                if pdu[0] == 0x1B {
                    notifications += 1
                    #expect(Array(pdu[1...2]) == [0x09, 0x00])
                    // The unused ICP slots are NaN.
                    #expect(Array(pdu[6...9]) == [0xFF, 0x07, 0xFF, 0x07])
                }
                if pdu[0] == 0x1D { indication = pdu }
            }
            t = t + .milliseconds(100)
        }
        let ind = try! #require(indication)
        #expect(Array(ind[1...2]) == [0x06, 0x00])
        let m = try! BloodPressureMeasurement.decode(ind[3...]).value
        #expect(m.timestamp != nil && m.pulseRate != nil && m.userID == 1)
        #expect(notifications > 150)  // 5 per second over ~35 s of inflation and deflation
        // A second indication waits for the confirmation; the confirmation is accepted once.
        #expect(sent(p.receive([0x1E], now: t)).isEmpty)
        let again = p.receive([0x1E], now: t)
        #expect(again.contains { if case .log = $0 { true } else { false } })  // protocol violation logged, no answer
    }

    @Test func racpNeedsItsCCCDAndReportsRecords() throws {
        var p = peripheral(.storedRecords, persona: .bps11)
        let racp = p.handles[.recordAccessControlPoint]!
        let rec = p.handles[.bloodPressureRecord]!
        func le(_ h: UInt16) -> String { format2(h & 0xFF) + " " + format2(h >> 8) }
        // Records whole (at the default ATT_MTU of 23 they go in segments).
        #expect(sent(p.receive(hx("02 F7 00"), now: .zero)) == ["03f700"])
        // RACP write before enabling its indications → CCCD Improperly Configured (0xFD).
        #expect(
            sent(p.receive(hx("12 \(le(racp)) 01 01"), now: .zero)) == [
                "0112" + le(racp).replacingOccurrences(of: " ", with: "") + "fd"
            ])
        _ = p.receive(hx("12 \(le(racp + 1)) 02 00"), now: .zero)
        // Report Stored Records with the Record characteristic's indications off: 0xFD too (the
        // records would go nowhere), and nothing is sent or started.
        #expect(
            sent(p.receive(hx("12 \(le(racp)) 01 01"), now: .zero)) == [
                "0112" + le(racp).replacingOccurrences(of: " ", with: "") + "fd"
            ])
        _ = p.receive(hx("12 \(le(rec + 1)) 02 00"), now: .zero)
        // Number of stored records: 3.
        var out = sent(p.receive(hx("12 \(le(racp)) 04 01"), now: .zero))
        #expect(out == ["13", "1d" + le(racp).replacingOccurrences(of: " ", with: "") + "05000300"])
        _ = p.receive([0x1E], now: .zero)
        // Report all: three 0x2B36 indications, one at a time, then the success response.
        out = sent(p.receive(hx("12 \(le(racp)) 01 01"), now: .zero))
        var records: [[UInt8]] = []
        while let last = out.last {
            let pdu = Hex.decode(last)!
            if pdu[0] == 0x1D { records.append(pdu) }
            out = sent(p.receive([0x1E], now: .zero))
        }
        #expect(records.count == 4)
        let seqs = try records.prefix(3).map { try BloodPressureRecord.decode($0[3...]).value.sequenceNumber }
        #expect(seqs == [0, 1, 2])
        #expect(Hex.encode(records[3][3...]) == "06000101")
    }

    /// A RACP request while another's records and response are not confirmed yet gets Procedure
    /// Already In Progress (0xFE); Abort Operation does not: it stops the report (the records
    /// still queued and the report's response are not sent; the one in flight stays) and succeeds.
    /// Malformed operands get Invalid Operand, a filter the cuff does not support Operand Not
    /// Supported, an operand where the operator takes none Invalid Operand.
    @Test func racpProcedureInProgressAndOperandErrors() throws {
        var p = peripheral(.storedRecords, persona: .bps11)
        let racp = p.handles[.recordAccessControlPoint]!, rec = p.handles[.bloodPressureRecord]!
        func le(_ h: UInt16) -> [UInt8] { [UInt8(h & 0xFF), UInt8(h >> 8)] }
        _ = p.receive([0x12] + le(rec + 1) + [0x02, 0x00], now: .zero)
        _ = p.receive([0x12] + le(racp + 1) + [0x02, 0x00], now: .zero)
        let report: [UInt8] = [0x12] + le(racp) + [0x01, 0x01]
        var out = sent(p.receive(report, now: .zero))
        #expect(out.count == 2 && out.last?.hasPrefix("1d") == true, "\(out)")
        // While the first record waits for its confirmation:
        #expect(sent(p.receive(report, now: .zero)) == [Hex.encode([0x01, 0x12] + le(racp) + [0xFE])])
        #expect(sent(p.receive([0x12] + le(racp) + [0x03, 0x00], now: .zero)) == ["13"], "abort is taken")
        // Confirm until nothing more comes: then a request is taken again.
        var responses: [String] = []
        var records = 0
        while let last = out.last, last.hasPrefix("1d") {
            if last.hasPrefix("1d" + Hex.encode(le(racp))) { responses.append(String(last.dropFirst(6))) }
            if last.hasPrefix("1d" + Hex.encode(le(rec))) { records += 1 }
            out = sent(p.receive([0x1E], now: .zero))
        }
        #expect(records == 1, "only the record already sent when the abort came (of 3)")
        #expect(responses == ["06000301"], "the abort's success, and no response for the aborted report")
        func answer(_ request: [UInt8]) -> String? {
            var out = sent(p.receive([0x12] + le(racp) + request, now: .zero))
            var response: String?
            while let last = out.last, last.hasPrefix("1d") {
                if last.hasPrefix("1d" + Hex.encode(le(racp))) { response = String(last.dropFirst(6)) }
                out = sent(p.receive([0x1E], now: .zero))
            }
            return response
        }
        #expect(answer([0x01, 0x03]) == "06000105", "≥ without an operand: Invalid Operand")
        #expect(answer([0x01, 0x03, 0x01, 0x01]) == "06000105", "a sequence number cut short")
        #expect(answer([0x04, 0x03]) == "06000405", "Report Number, ≥ without an operand")
        #expect(answer([0x01, 0x03, 0x02, 0, 0, 0, 0]) == "06000109", "user facing time: Operand Not Supported")
        #expect(answer([0x09, 0x01]) == "06000902", "an unknown op code")
        #expect(answer([0x01]) == "06000103", "no operator")
        #expect(answer([0x01, 0x04, 0x01, 0x02, 0x00, 0x01, 0x00]) == "06000105", "a range from 2 down to 1")
        #expect(answer([0x01, 0x01, 0x00]) == "06000105", "All Records takes no operand")
        #expect(answer([0x04, 0x06, 0x01, 0x00, 0x00]) == "06000405", "nor does Last Record")
        #expect(answer([0x03, 0x01]) == "06000303", "Abort's operator is Null")
        #expect(answer([0x03, 0x00]) == "06000301", "Abort with nothing under way succeeds")
        #expect(answer([0x04, 0x01]) == "05000300", "and a good request still works")
        #expect(answer([0x01, 0x01]) == "06000101", "and so does a report after an abort")
    }

    /// The wait for a confirmation that the cuff logs counts from when the indication went out,
    /// not from when it was queued behind another.
    @Test func aConfirmationWaitCountsFromTheSend() throws {
        var p = peripheral(.storedRecords, persona: .bps11)
        let racp = p.handles[.recordAccessControlPoint]!, rec = p.handles[.bloodPressureRecord]!
        func le(_ h: UInt16) -> [UInt8] { [UInt8(h & 0xFF), UInt8(h >> 8)] }
        func logs(_ out: [CuffPeripheral.Output]) -> [String] {
            out.compactMap { if case let .log(s) = $0, s.contains("until the client confirmed") { s } else { nil } }
        }
        _ = p.receive([0x12] + le(rec + 1) + [0x02, 0x00], now: .zero)
        _ = p.receive([0x12] + le(racp + 1) + [0x02, 0x00], now: .zero)
        _ = p.receive([0x12] + le(racp) + [0x01, 0x01], now: .zero)  // 3 records and a response queued at 0
        #expect(logs(p.receive([0x1E], now: .seconds(5))) == ["5.0 s until the client confirmed an indication"])
        #expect(logs(p.receive([0x1E], now: .milliseconds(5500))) == [], "sent at 5 s, confirmed 0.5 s later")
        #expect(logs(p.receive([0x1E], now: .seconds(7))) == ["1.5 s until the client confirmed an indication"])
    }

    /// A Blood Pressure Record longer than an indication carries at the default ATT_MTU (23) goes
    /// in segments of at most 20 bytes, which reassemble to the record sent whole at ATT_MTU 247.
    @Test func aRecordLongerThanTheMTUAllowsGoesInSegments() throws {
        func lastRecord(
            mtu: UInt16?, _ config: SimulatorConfiguration = .init(scenario: .storedRecords, persona: .bps11, seed: 3)
        ) throws -> [[UInt8]] {
            var p = CuffPeripheral(configuration: config)
            _ = p.connected(now: .zero)
            let racp = p.handles[.recordAccessControlPoint]!, rec = p.handles[.bloodPressureRecord]!
            func le(_ h: UInt16) -> [UInt8] { [UInt8(h & 0xFF), UInt8(h >> 8)] }
            if let mtu { _ = p.receive([0x02] + le(mtu), now: .zero) }
            _ = p.receive([0x12] + le(rec + 1) + [0x02, 0x00], now: .zero)
            _ = p.receive([0x12] + le(racp + 1) + [0x02, 0x00], now: .zero)
            var out = sent(p.receive([0x12] + le(racp) + [0x01, 0x06], now: .zero)).compactMap(Hex.decode)
            var values: [[UInt8]] = []
            while let last = out.last, last[0] == 0x1D {
                if Array(last[1...2]) == le(rec) { values.append(Array(last.dropFirst(3))) }
                out = sent(p.receive([0x1E], now: .zero)).compactMap(Hex.decode)
            }
            return values
        }
        let whole = try lastRecord(mtu: 247)
        #expect(whole.count == 1 && whole[0].first == 0x03 && whole[0].count > 20, "\(whole)")
        let cut = try lastRecord(mtu: nil)
        #expect(cut.count > 1 && cut.allSatisfy { $0.count <= 20 }, "\(cut.map(\.count))")
        var assembler = RecordAssembler()
        var body: [UInt8]?
        for v in cut { body = try assembler.add(RecordSegment.decode(v[...])).body ?? body }
        #expect(body == Array(whole[0].dropFirst()))
        // --record-segment larger than the ATT_MTU allows: segments of at most ATT_MTU - 3 still,
        // which reassemble to the same record.
        var config = SimulatorConfiguration(scenario: .storedRecords, persona: .bps11, seed: 3)
        config.recordSegmentLength = 64
        let big = try lastRecord(mtu: nil, config)
        var again = RecordAssembler()
        var bigBody: [UInt8]?
        for v in big { bigBody = try again.add(RecordSegment.decode(v[...])).body ?? bigBody }
        #expect(bigBody == Array(whole[0].dropFirst()), "\(big.map(\.count))")
    }

    /// Stored readings the GATT server never sent (the client unsubscribed while they were
    /// queued) are not in flight: the next confirmation (of a live result) is the live result's,
    /// and the next connection gets the readings the client never had, each once.
    @Test func indicationsTheServerDroppedAreNotCountedInFlight() throws {
        var p = peripheral(.storedRecords)
        let bpm = p.handles[.bloodPressureMeasurement]!, control = p.handles[.cuffControl]!
        func le(_ h: UInt16) -> [UInt8] { [UInt8(h & 0xFF), UInt8(h >> 8)] }
        func stamp(_ pdu: [UInt8]) throws -> String {
            "\(try #require(try BloodPressureMeasurement.decode(pdu[3...]).value.timestamp))"
        }
        // Subscribe: the first stored reading goes out, two wait behind it.
        let first = sent(p.receive([0x12] + le(bpm + 1) + [0x02, 0x00], now: .zero)).compactMap(Hex.decode)
        let got = try first.filter { $0[0] == 0x1D }.map(stamp)
        #expect(got.count == 1)
        // Unsubscribe, confirm: the two waiting are dropped, not sent.
        #expect(sent(p.receive([0x12] + le(bpm + 1) + [0x00, 0x00], now: .zero)) == ["13"])
        #expect(sent(p.receive([0x1E], now: .zero)).isEmpty)
        #expect(p.machine.connection.outstandingIndications == 0)
        // Subscribe again, measure: the live result is indicated and confirmed.
        _ = p.receive([0x12] + le(bpm + 1) + [0x02, 0x00], now: .zero)
        _ = p.receive([0x12] + le(control) + [0x01], now: .zero)
        var t = Timestamp.zero
        var live: String?
        while live == nil, t < .seconds(300) {
            t = t + .milliseconds(100)
            for case let .send(pdu) in p.tick(now: t) where pdu[0] == 0x1D { live = try stamp(pdu) }
        }
        #expect(live != nil)
        _ = p.receive([0x1E], now: t)
        _ = p.disconnected(now: t)
        // The next connection: the two stored readings the client never got, and not the result.
        _ = p.connected(now: t + .seconds(1))
        var next = sent(p.receive([0x12] + le(bpm + 1) + [0x02, 0x00], now: t + .seconds(1))).compactMap(Hex.decode)
        var stamps: [String] = []
        while let pdu = next.last(where: { $0[0] == 0x1D }) {
            stamps.append(try stamp(pdu))
            next = sent(p.receive([0x1E], now: t + .seconds(1))).compactMap(Hex.decode)
        }
        #expect(stamps.count == 2, "\(stamps)")
        #expect(!stamps.contains(live ?? "") && !stamps.contains(got.first ?? ""), "\(stamps) \(got) \(live ?? "")")
    }
}

func format2(_ v: UInt16) -> String {
    let s = String(v, radix: 16)
    return s.count == 1 ? "0" + s : s
}

/// A stored reading goes to a client until the client confirms it, then not again.
@Suite("Simulated cuff: confirmed readings are not sent again")
struct ConfirmedReadingTests {
    typealias M = CuffSimulatorMachine

    /// The Blood Pressure Measurement indications among `actions`.
    static func results(_ actions: [M.Action]) -> [BloodPressureMeasurement] {
        actions.compactMap { a in
            if case let .indicate(.bloodPressureMeasurement, v) = a {
                try? BloodPressureMeasurement.decode(v[...]).value
            } else {
                nil
            }
        }
    }

    /// Connects (as `client`) and subscribes to results; returns the stored readings sent.
    static func subscribe(_ m: inout M, client: String? = nil, at t: Timestamp) -> [BloodPressureMeasurement] {
        _ = m.connect(client: client, now: t)
        return results(m.handle(.subscriptionChanged(.bloodPressureMeasurement, notify: false, indicate: true, t)))
    }

    @Test func confirmedStoredReadingsAreNotResentOnTheNextConnection() {
        var m = M(configuration: SimulatorConfiguration(scenario: .storedRecords, seed: 3))
        let first = Self.subscribe(&m, at: .seconds(1))
        #expect(first.count == 3)
        for _ in first { _ = m.handle(.indicationConfirmed(.seconds(2))) }
        _ = m.handle(.disconnected(.seconds(3)))
        #expect(Self.subscribe(&m, at: .seconds(10)).isEmpty)
        _ = m.handle(.disconnected(.seconds(11)))
        // The same holds through the plain `.connected` event (the anonymous client).
        _ = m.handle(.connected(.seconds(20)))
        #expect(
            Self.results(
                m.handle(.subscriptionChanged(.bloodPressureMeasurement, notify: false, indicate: true, .seconds(20)))
            ).isEmpty)
    }

    /// An indication the server dropped among several asked for at once (`behind`: how many
    /// were asked for after it) is forgotten, and the confirmations go to the others.
    @Test func aDroppedIndicationAmongSeveralIsTheOneForgotten() {
        var m = M(configuration: SimulatorConfiguration(scenario: .storedRecords, seed: 3))
        let first = Self.subscribe(&m, at: .seconds(1))
        #expect(first.count == 3)
        _ = m.handle(.indicationDropped(.seconds(1), behind: 1))  // the middle one
        #expect(m.connection.outstandingIndications == 2)
        for _ in 0..<2 { _ = m.handle(.indicationConfirmed(.seconds(2))) }
        _ = m.handle(.disconnected(.seconds(3)))
        #expect(Self.subscribe(&m, at: .seconds(10)).map(\.timestamp) == [first[1].timestamp])
    }

    @Test func unconfirmedReadingsAreSentAgain() {
        var m = M(configuration: SimulatorConfiguration(scenario: .storedRecords, seed: 3))
        let first = Self.subscribe(&m, at: .seconds(1))
        #expect(first.count == 3)
        _ = m.handle(.indicationConfirmed(.seconds(2)))  // only the oldest confirmed
        _ = m.handle(.disconnected(.seconds(3)))
        let second = Self.subscribe(&m, at: .seconds(10))
        #expect(second.map(\.timestamp) == first.dropFirst().map(\.timestamp))
    }

    @Test func eachClientGetsTheReadingsItHasNotConfirmed() {
        var m = M(configuration: SimulatorConfiguration(scenario: .storedRecords, seed: 3))
        let a = Self.subscribe(&m, client: "AA:AA:AA:AA:AA:01", at: .seconds(1))
        for _ in a { _ = m.handle(.indicationConfirmed(.seconds(2))) }
        _ = m.handle(.disconnected(.seconds(3)))
        #expect(Self.subscribe(&m, client: "BB:BB:BB:BB:BB:02", at: .seconds(10)).count == 3)
        _ = m.handle(.disconnected(.seconds(11)))
        #expect(Self.subscribe(&m, client: "AA:AA:AA:AA:AA:01", at: .seconds(20)).isEmpty)
    }

    @Test func theCuffRemembersABoundedNumberOfClients() {
        var m = M(configuration: SimulatorConfiguration(scenario: .storedRecords, seed: 3))
        for i in 0..<40 {
            let sent = Self.subscribe(&m, client: "client-\(i)", at: .seconds(Double(i)))
            #expect(sent.count == 3)
            for _ in sent { _ = m.handle(.indicationConfirmed(.seconds(Double(i)))) }
            _ = m.handle(.disconnected(.seconds(Double(i))))
        }
        #expect(m.delivered.count == M.maxBondedClients)
        #expect(Self.subscribe(&m, client: "client-39", at: .seconds(100)).isEmpty)
        _ = m.handle(.disconnected(.seconds(100)))
        #expect(Self.subscribe(&m, client: "client-0", at: .seconds(101)).count == 3)
    }

    /// A normal cuff that measures when a client subscribes and lingers 1 s after a result.
    static func autostartingCuff() -> M {
        var sim = SimulatorConfiguration(scenario: .normal, seed: 3, autostart: true)
        sim.linger = .seconds(1)
        return M(configuration: sim)
    }

    /// Takes `first` (actions already out), then ticks every 200 ms from `t` until a result or a
    /// disconnect comes out, or `t` reaches `limit`; `t` ends at the last tick.
    static func runUntilResult(
        _ m: inout M, _ t: inout Timestamp, after first: [M.Action] = [], limit: Timestamp
    ) -> (results: [BloodPressureMeasurement], disconnected: Bool) {
        var out = first
        var results: [BloodPressureMeasurement] = []
        var disconnected = false
        while true {
            disconnected = out.contains { if case .disconnect = $0 { true } else { false } }
            results += Self.results(out)
            guard results.isEmpty, !disconnected, t < limit else { break }
            t = t + .milliseconds(200)
            out = m.handle(.tick(t))
        }
        return (results, disconnected)
    }

    @Test func aConfirmedLiveResultIsNotSentAsAStoredOne() {
        var m = Self.autostartingCuff()
        #expect(Self.subscribe(&m, at: .zero).isEmpty)
        var t = Timestamp.zero
        let live = Self.runUntilResult(&m, &t, limit: .seconds(120)).results
        #expect(live.count == 1)
        _ = m.handle(.indicationConfirmed(t))
        _ = m.handle(.disconnected(t + .seconds(1)))
        #expect(Self.subscribe(&m, at: t + .seconds(10)).isEmpty)
    }

    /// A result the client never confirmed is sent first on the next connection; once that is
    /// confirmed the cuff measures anew (autostart) and does not switch off mid-measurement.
    @Test func anUnconfirmedResultResentThenAFullNewMeasurement() {
        var m = Self.autostartingCuff()
        #expect(Self.subscribe(&m, at: .zero).isEmpty)
        var t = Timestamp.zero
        let live = Self.runUntilResult(&m, &t, limit: .seconds(120)).results
        #expect(live.count == 1)
        _ = m.handle(.disconnected(t + .milliseconds(100)))  // hung up without confirming
        t = t + .seconds(10)
        let resent = Self.subscribe(&m, at: t)
        #expect(resent.map(\.systolic) == live.map(\.systolic))
        let (next, ended) = Self.runUntilResult(
            &m, &t, after: m.handle(.indicationConfirmed(t)), limit: .seconds(400))
        #expect(!ended)
        #expect(next.count == 1)
        #expect(next.first?.systolic != live.first?.systolic || next.first?.timestamp != live.first?.timestamp)
    }

    @Test func aScenarioMayOptInToResending() {
        #expect(Scenario.allCases.allSatisfy { !$0.resendsConfirmedReadings })
        var sim = SimulatorConfiguration(scenario: .storedRecords, seed: 3)
        sim.resendsConfirmedReadings = true
        var m = M(configuration: sim)
        let first = Self.subscribe(&m, at: .seconds(1))
        for _ in first { _ = m.handle(.indicationConfirmed(.seconds(2))) }
        _ = m.handle(.disconnected(.seconds(3)))
        #expect(Self.subscribe(&m, at: .seconds(10)).count == 3)
    }

    @Test func racpStillReportsEveryStoredReading() {
        var m = M(configuration: SimulatorConfiguration(scenario: .storedRecords, persona: .bps11, seed: 3))
        for round in 0..<2 {
            let t = Timestamp.seconds(Double(round * 10))
            _ = m.connect(client: nil, now: t)
            _ = m.handle(.mtuChanged(247))  // whole records (at 23 they go in segments)
            _ = m.handle(.subscriptionChanged(.bloodPressureRecord, notify: false, indicate: true, t))
            _ = m.handle(.subscriptionChanged(.recordAccessControlPoint, notify: false, indicate: true, t))
            let out = m.handle(.written(.recordAccessControlPoint, [0x01, 0x01], t))
            let records = out.filter { if case .indicate(.bloodPressureRecord, _) = $0 { true } else { false } }
            #expect(records.count == 3, "round \(round)")
            for _ in 0..<(records.count + 1) { _ = m.handle(.indicationConfirmed(t)) }
            _ = m.handle(.disconnected(t + .seconds(1)))
        }
    }
}

@Suite("Simulated cuff: Current Time writes")
struct CurrentTimeWriteTests {
    @Test func anImpossibleDateIsRejectedAValidLeapDayAccepted() {
        var m = CuffSimulatorMachine(configuration: SimulatorConfiguration())
        _ = m.handle(.connected(.zero))
        // 2023-02-29 10:30:00 (Current Time: Date Time, day of week, fractions, adjust reason).
        let bad = m.handle(.written(.currentTime, Hex.decode("E7 07 02 1D 0A 1E 00 03 00 00")!, .zero))
        #expect(bad.contains(.writeResult(.currentTime, error: 0xFF)))
        let good = m.handle(.written(.currentTime, Hex.decode("E8 07 02 1D 0A 1E 00 04 00 00")!, .zero))
        #expect(good.contains(.writeResult(.currentTime, error: nil)))
        #expect(good.contains(.log("clock set to 2024-02-29T10:30:00")))
    }

    /// Current Time is 10 bytes: any other length is Invalid Attribute Value Length (0x0D), and
    /// the clock stays (probe R: 11 to 512 bytes set it from the first 10; 0 to 9 got 0xFF).
    @Test(arguments: [0, 1, 9, 11, 40, 512])
    func aWriteOfAnotherLengthIsRefusedAndTheClockStays(_ count: Int) {
        var m = CuffSimulatorMachine(configuration: SimulatorConfiguration())
        _ = m.handle(.connected(.zero))
        let valid = Hex.decode("E8 07 02 1D 0A 1E 00 04 00 00")!
        let value = Array((valid + [UInt8](repeating: 0, count: max(0, count - 10))).prefix(count))
        let out = m.handle(.written(.currentTime, value, .zero))
        #expect(out.contains(.writeResult(.currentTime, error: 0x0D)))
        #expect(!out.contains { if case let .log(s) = $0 { s.hasPrefix("clock set") } else { false } })
    }
}
