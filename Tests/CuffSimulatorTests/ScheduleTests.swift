import BloodPressure
import CuffCore
import GATT
import Testing
@testable import CuffSimulator

/// `--every`: the cuff measures on its own schedule, keeps what nobody received, and skips the
/// cuff-pressure samples nobody follows.
@Suite("Simulator schedule")
struct ScheduleTests {
    func machine(every: Double?, persona: Persona = .bps10, capacity: Int = 200) -> CuffSimulatorMachine {
        var c = SimulatorConfiguration(scenario: .normal, persona: persona, seed: 5)
        c.measureEvery = every.map { .seconds($0) }
        c.memoryCapacity = capacity
        return CuffSimulatorMachine(configuration: c)
    }

    /// Ticks the machine at its own deadlines until `until`.
    func run(_ m: inout CuffSimulatorMachine, until end: Timestamp) -> [CuffSimulatorMachine.Action] {
        var out: [CuffSimulatorMachine.Action] = []
        while let d = m.nextDeadline, d <= end { out += m.handle(.tick(d)) }
        return out
    }

    @Test func measuresOnItsOwnAndKeepsTheReadingsWhenNobodyIsConnected() {
        var m = machine(every: 60)
        m.powerOn(now: .zero)
        let first = m.nextDeadline
        #expect(first != nil && first! < .zero + .seconds(60), "the first measurement comes within one interval")
        // Ten slots from the first on; each measurement takes well under a minute.
        let out = run(&m, until: first! + .seconds(599))
        #expect(m.measurementsDone == 10)
        #expect(m.records.count == 10)
        #expect(!out.contains { if case .indicate = $0 { true } else { false } }, "nothing is sent to nobody")
        #expect(!out.contains { if case .notify = $0 { true } else { false } })
    }

    @Test func theNextClientGetsTheStoredReadingsOldestFirst() {
        var m = machine(every: 60)
        m.powerOn(now: .zero)
        _ = run(&m, until: .zero + .seconds(200))
        let kept = m.records.count
        #expect(kept >= 3)
        let now = Timestamp.zero + .seconds(200)
        _ = m.connect(client: nil, now: now)
        let out = m.handle(.subscriptionChanged(.bloodPressureMeasurement, notify: false, indicate: true, now))
        let sent = out.compactMap { if case let .indicate(.bloodPressureMeasurement, v) = $0 { v } else { nil } }
        #expect(sent.count == kept)
        // Confirming each marks it delivered; a later client is not sent them again.
        for _ in sent { _ = m.handle(.indicationConfirmed(now)) }
        #expect(m.confirmedReadings == kept)
        _ = m.handle(.disconnected(now))
        _ = m.connect(client: nil, now: now)
        let again = m.handle(.subscriptionChanged(.bloodPressureMeasurement, notify: false, indicate: true, now))
        #expect(!again.contains { if case .indicate = $0 { true } else { false } })
    }

    @Test func theMemoryHoldsAtMostItsCapacityDroppingTheOldest() {
        var m = machine(every: 60, capacity: 4)
        m.powerOn(now: .zero)
        _ = run(&m, until: m.nextDeadline! + .seconds(599))
        #expect(m.measurementsDone == 10)
        #expect(m.records.count == 4)
        #expect(m.records.map(\.sequence) == [6, 7, 8, 9])
    }

    @Test func withoutAPressureSubscriberTheResultIsTheSameAndNoSamplesAreTaken() {
        // Same seed: one client follows the cuff pressure, the other only the result.
        func session(pressure: Bool) -> (results: [[UInt8]], notifications: Int, ticks: Int) {
            var m = machine(every: nil)
            _ = m.connect(client: nil, now: .zero)
            _ = m.handle(.subscriptionChanged(.bloodPressureMeasurement, notify: false, indicate: true, .zero))
            if pressure {
                _ = m.handle(.subscriptionChanged(.intermediateCuffPressure, notify: true, indicate: false, .zero))
            }
            var out = m.handle(.buttonPressed(.zero))
            var ticks = 0
            while let d = m.nextDeadline, d < .zero + .seconds(120),
                !out.contains(where: { if case .indicate = $0 { true } else { false } })
            {
                ticks += 1
                out += m.handle(.tick(d))
            }
            let results = out.compactMap { if case let .indicate(.bloodPressureMeasurement, v) = $0 { v } else { nil } }
            let notes = out.filter { if case .notify = $0 { true } else { false } }.count
            return (results, notes, ticks)
        }
        let followed = session(pressure: true), quiet = session(pressure: false)
        #expect(followed.results.count == 1)
        // The same reading (the time stamp may differ by the last sample's step).
        func values(_ v: [UInt8]) -> [Double?] {
            guard let d = try? BloodPressureMeasurement.decode(v[...], quirks: []) else { return [] }
            return [d.value.systolic.doubleValue, d.value.diastolic.doubleValue, d.value.pulseRate?.doubleValue]
        }
        #expect(values(followed.results[0]) == values(quiet.results[0]))
        #expect(values(quiet.results[0]).count == 3)
        #expect(followed.notifications > 100)
        #expect(quiet.notifications == 0)
        #expect(quiet.ticks < 10, "\(quiet.ticks) ticks without anyone following the pressure")
    }
}
