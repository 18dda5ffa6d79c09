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

    @Test func withoutAPressureSubscriberTheResultsAreTheSameAndNoSamplesAreTaken() {
        // Same seed: one client follows the cuff pressure, the other only the result; three
        // measurements in a row, so the noise a skipped sample would have drawn shows in the next.
        func session(pressure: Bool) -> (results: [[UInt8]], notifications: Int, ticks: Int) {
            var m = machine(every: nil)
            _ = m.connect(client: nil, now: .zero)
            _ = m.handle(.subscriptionChanged(.bloodPressureMeasurement, notify: false, indicate: true, .zero))
            if pressure {
                _ = m.handle(.subscriptionChanged(.intermediateCuffPressure, notify: true, indicate: false, .zero))
            }
            var results: [[UInt8]] = [], notes = 0, ticks = 0
            var now = Timestamp.zero
            for _ in 0..<3 {
                var out = m.handle(.buttonPressed(now))
                while let d = m.nextDeadline, d < now + .seconds(120),
                    !out.contains(where: { if case .indicate = $0 { true } else { false } })
                {
                    ticks += 1
                    now = d
                    out += m.handle(.tick(d))
                }
                results += out.compactMap {
                    if case let .indicate(.bloodPressureMeasurement, v) = $0 { v } else { nil }
                }
                notes += out.filter { if case .notify = $0 { true } else { false } }.count
                _ = m.handle(.indicationConfirmed(now))
                // Until the cuff has let the air out.
                while let d = m.nextDeadline, m.isMeasuring {
                    now = d
                    notes += m.handle(.tick(d)).filter { if case .notify = $0 { true } else { false } }.count
                }
                now = now + .seconds(5)
            }
            return (results, notes, ticks)
        }
        let followed = session(pressure: true), quiet = session(pressure: false)
        #expect(followed.results.count == 3)
        // The very same bytes: values, and the time stamps too (the same sample times).
        #expect(followed.results == quiet.results)
        #expect(Set(followed.results).count == 3, "three different readings")
        #expect(followed.notifications > 300)
        #expect(quiet.notifications == 0)
        #expect(quiet.ticks < 30, "\(quiet.ticks) ticks without anyone following the pressure")
    }
}
