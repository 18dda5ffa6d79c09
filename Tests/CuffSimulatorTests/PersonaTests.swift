import CuffLogging
import Foundation
import Testing
import BloodPressure
import CuffCore
import CuffRuntime
import CuffSession
import CuffSimulator
import GATT
import Transport

/// `cuff simulate --quirk NAME`: each family's persona against the session over a real
/// socketpair, with the readings expected out (shared/spec/other-cuffs.md says what each does).
@Suite("Device-family personas ↔ session over a real socketpair", .serialized)
struct PersonaTests {
    static func run(_ q: QuirkProfile, start: Bool = false, autostart: Bool = true) throws -> SocketRun {
        var sim = SimulatorConfiguration(scenario: .normal, persona: .bps10, seed: 7, autostart: autostart && !start)
        sim.linger = .seconds(1)
        sim.behave(as: q)
        let simLogs = LogRecorder()
        let driver = PeripheralDriver(
            peripheral: CuffPeripheral(configuration: sim), clock: SimulationClock(speed: 400), signals: nil,
            log: simLogs.logger())
        return try SocketRun.run(driver: driver, logs: simLogs, start: start)
    }

    static func applied(_ r: SocketRun) -> [String] { r.logs.filter { $0.hasPrefix("applying quirk profile") } }

    /// `--autostart` on a family that never measures on its own says so (the simulator logs why).
    @Test func autostartThatCannotApplyIsSaid() {
        func why(_ q: QuirkProfile?, autostart: Bool = true) -> String? {
            var c = SimulatorConfiguration(scenario: .normal, persona: .bps10, seed: 1, autostart: autostart)
            if let q { c.behave(as: q) }
            return c.autostartIgnored
        }
        #expect(why(.qardio)?.contains("cuff measure --start") == true)
        for q in [QuirkProfile.andUA651, .veroval, .sbm69] {
            #expect(why(q)?.contains("memory only") == true, "\(q.name)")
        }
        for q in [nil, QuirkProfile.boso, .beurerBM96, .medisana] { #expect(why(q) == nil, "\(q?.name ?? "standard")") }
        #expect(why(.qardio, autostart: false) == nil)
    }

    @Test func andUA651() throws {
        let r = try Self.run(.andUA651)
        #expect(Self.applied(r) == ["applying quirk profile and-ua651 for UA-651BLE"])
        // Two NaN markers skipped (said), three stored readings kept, then the cuff hung up.
        #expect(r.logs.filter { $0.hasPrefix("skipped a marker record") }.count == 2)
        #expect(r.measurements.count == 3)
        #expect(r.measurements.allSatisfy { $0.stored && $0.hasValues && $0.userID == 1 })
        let times = r.measurements.map { $0.timestamp ?? "" }
        #expect(times == times.sorted())  // oldest first
        #expect(r.simulatorLogs.contains { $0.hasPrefix("clock set to") && $0.hasSuffix("(Date Time)") })
        #expect(r.simulatorLogs.contains("buffer sent; the cuff switches off"))
        #expect(r.outcome == .completed)
        #expect(r.exitCode == 0)
    }

    @Test func veroval() throws {
        let r = try Self.run(.veroval)
        #expect(Self.applied(r) == ["applying quirk profile veroval for VEROVAL"])
        // The whole memory, newest first: user 0's three, then user 1's two; MAP absent.
        #expect(r.measurements.map(\.userID) == [0, 0, 0, 1, 1])
        let t = r.measurements.map { $0.timestamp ?? "" }
        #expect(Array(t[0..<3]) == t[0..<3].sorted(by: >) && Array(t[3...]) == t[3...].sorted(by: >))
        for m in r.measurements {
            #expect(m.stored && m.meanArterialPressure == .nan && m.status?.rawValue ?? 0 & 0x8000 != 0)
            #expect(m.decoded.serialized().contains("\"mean_arterial_pressure\":null"))
            #expect(!m.warnings.contains { $0.code == .rfuStatus })
        }
        #expect(r.logs.contains("the cuff's memory dump is complete"))
        #expect(r.outcome == .completed)
    }

    @Test func sbm69() throws {
        let r = try Self.run(.sbm69)
        #expect(Self.applied(r) == ["applying quirk profile sbm69 for SBM69"])
        #expect(r.measurements.count == 3)
        #expect(
            r.measurements.allSatisfy {
                $0.stored && ($0.systolic.doubleValue ?? 0) > 100 && $0.meanArterialPressure.doubleValue != nil
            })
        #expect(r.outcome == .completed)
        #expect(r.simulatorLogs.contains("buffer sent; the cuff switches off"))
    }

    @Test func beurerBM96() throws {
        let r = try Self.run(.beurerBM96)
        #expect(Self.applied(r) == ["applying quirk profile beurer-bm96 for BM96"])
        #expect(r.measurements.map(\.userID) == [1, 2, 1])  // two stored, then the live one
        for m in r.measurements {
            #expect(m.raw[0] == 0xDE)  // reserved bits 6 and 7, user-ID flag set (the facts' frames)
            #expect(m.systolic.exponent == -1 && m.systolic.doubleValue.map { $0 == $0.rounded() } == true)
            #expect(m.meanArterialPressure == .nan)
            #expect(m.warnings.map(\.code).allSatisfy { $0 == .quirkApplied })
        }
        #expect(r.measurements.last?.stored == false)
    }

    @Test func beurerBM85() throws {
        let r = try Self.run(.beurerBM85)
        #expect(Self.applied(r) == ["applying quirk profile beurer-bm85 for BM85"])
        let m = try #require(r.measurements.last)
        #expect(!m.stored && m.userID == 1 && m.raw[0] & 0x08 == 0)
        #expect(m.pulseRate?.doubleValue.map { (50...100).contains($0) } == true)
    }

    @Test func boso() throws {
        let r = try Self.run(.boso)
        #expect(Self.applied(r) == ["applying quirk profile boso for boso medicus system"])
        #expect(r.measurements.count == 3)
        let err = r.measurements[1]
        #expect(!err.hasValues && err.warnings.map(\.code) == [.errorReading])
        #expect(err.decoded.serialized().contains("\"systolic\":\"NaN\""))
        #expect(r.measurements[0].hasValues && r.measurements[2].hasValues)
        #expect(r.measurements[0].warnings.isEmpty)
    }

    @Test func medisana() throws {
        let r = try Self.run(.medisana)
        #expect(Self.applied(r) == ["applying quirk profile medisana for 1872B"])
        #expect(r.measurements.map(\.userID) == [0, 1, 1])
        #expect(r.measurements.allSatisfy { $0.warnings.isEmpty })
    }

    @Test func qardioStartsOnItsVendorWrite() throws {
        let r = try Self.run(.qardio, start: true)
        #expect(
            Self.applied(r).first
                == "applying quirk profile qardio (its control characteristic 583cb5b3-875d-40ed-9098-c39eb0c1983d)")
        #expect(r.simulatorLogs.contains { $0.contains("vendor start command f101") })
        #expect(r.measurements.count == 1 && r.measurements[0].stored == false)
        #expect(r.outcome == .completed)
    }

    /// Without the Date Time write the A&D persona hangs up at 5 s and sends nothing.
    @Test func andUA651HangsUpWithoutItsClock() throws {
        var sim = SimulatorConfiguration(scenario: .normal, seed: 7)
        sim.behave(as: .andUA651)
        var m = CuffSimulatorMachine(configuration: sim)
        _ = m.handle(.connected(.zero))
        #expect(m.nextDeadline == .seconds(5))
        let sub = m.handle(.subscriptionChanged(.bloodPressureMeasurement, notify: false, indicate: true, .seconds(1)))
        #expect(!sub.contains { if case .indicate = $0 { true } else { false } })
        let tick = m.handle(.tick(.seconds(5)))
        #expect(tick.contains(.disconnect("no Date Time and result subscription in time")))
        // With its clock set in time: markers, then the buffer.
        var ok = CuffSimulatorMachine(configuration: sim)
        _ = ok.handle(.connected(.zero))
        _ = ok.handle(.written(.dateTime, [0xEA, 0x07, 1, 1, 8, 0, 0], .seconds(1)))
        let sent = ok.handle(
            .subscriptionChanged(.bloodPressureMeasurement, notify: false, indicate: true, .seconds(2)))
        let values = sent.compactMap { if case let .indicate(_, v) = $0 { v } else { nil } }
        #expect(values.count == 5)
        #expect(values.prefix(2).allSatisfy { $0 == [0x00, 0xFF, 0x07, 0xFF, 0x07, 0xFF, 0x07] })
        #expect(ok.nextDeadline == nil || ok.nextDeadline! > .seconds(5))
    }

    /// A strict-standard cuff is never given a profile: every scenario, persona and fleet name of
    /// the simulator (but the beurer-bm85 scenario, which is that cuff) matches none, and its
    /// control point is ours.
    @Test func noScenarioIsTakenForAFamily() {
        for s in Scenario.allCases {
            for p in Persona.allCases {
                let c = SimulatorConfiguration(scenario: s, persona: p)
                let q =
                    QuirkProfile.matching(name: c.name, model: c.model)
                    ?? QuirkProfile.matching(name: c.manufacturer, model: nil)
                #expect(q?.name == (s == .beurerBM85 ? "beurer-bm85" : nil), "\(s.rawValue) \(p.rawValue)")
                // No family's control characteristic in its table (a characteristic declaration
                // holds the UUID in its last 16 bytes, little-endian).
                let qardio = Array(
                    BluetoothUUID(QuirkProfile.qardio.vendorStart!.characteristicUUID)!.littleEndianBytes)
                #expect(
                    !CuffPeripheral(configuration: c).server.database.attributes.contains {
                        $0.value.suffix(16).elementsEqual(qardio)
                    })
            }
        }
        for i in [1, 9999, 100_000] {
            #expect(QuirkProfile.matching(name: "cuff-sim-\(i)", model: "SIM-\(i)") == nil)
        }
    }
}
