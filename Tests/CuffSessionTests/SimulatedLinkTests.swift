import CuffLogging
import Testing
import BloodPressure
import CuffCore
import CuffRuntime
import CuffSimulator
import Transport
@testable import CuffSession

final class Collected {
    var items: [SessionOutput] = []
    let recorder = LogRecorder()
    var logs: [String] { recorder.lines }
}

/// The in-process simulated link on its virtual clock: deterministic, and instant.
@Suite("Simulated link (virtual time)")
struct SimulatedLinkTests {
    func run(_ scenario: Scenario, persona: Persona = .bps10, requireEncryption: Bool = false, seed: UInt64 = 9) -> (
        SessionOutcome, Collected
    ) {
        let c = Collected()
        let link = SimulatedLink(
            simulator: SimulatorConfiguration(scenario: scenario, persona: persona, seed: seed, autostart: true),
            session: CuffSessionConfiguration(address: "simulated"),
            hooks: SessionHooks(emit: { c.items.append($0) }, log: c.recorder.logger()),
            speed: nil, requireEncryption: requireEncryption, wallStartMicros: 1_790_000_000_000_000)
        return (link.run(), c)
    }

    @Test func aCuffThatNeedsABondGetsItsLinkRaisedAndTheRequestRetried() {
        let (outcome, c) = run(.normal, requireEncryption: true)
        #expect(outcome == .completed)
        #expect(c.logs.contains { $0.contains("asks for more security") })
        #expect(c.items.contains { if case .measurement = $0 { true } else { false } })
    }

    @Test func deterministicForASeed() {
        let a = run(.irregularPulse).1.items, b = run(.irregularPulse).1.items
        #expect(a == b)
        #expect(a.count > 150)
        let c = run(.irregularPulse, seed: 10).1.items
        #expect(a != c)
    }

    @Test func notificationsArriveAtTheCuffsRate() {
        let (_, c) = run(.normal)
        let times = c.items.compactMap { if case let .progress(p) = $0 { p.elapsed } else { nil } }
        let gaps = zip(times, times.dropFirst()).map { ($1 - $0) }
        #expect(gaps.allSatisfy { abs($0 - 0.2) < 0.011 })  // 5 per second, on the cuff's clock
        // Inflation ~15 mmHg/s to 30–40 above systolic, deflation ~3 mmHg/s.
        let p = c.items.compactMap { if case let .progress(p) = $0 { p } else { nil } }
        let peakIndex = p.indices.max { (p[$0].cuffPressure.doubleValue ?? 0) < (p[$1].cuffPressure.doubleValue ?? 0) }!
        let inflateRate =
            (p[peakIndex].cuffPressure.doubleValue! - p[0].cuffPressure.doubleValue!)
            / (p[peakIndex].elapsed - p[0].elapsed)
        let deflateRate =
            (p[peakIndex].cuffPressure.doubleValue! - p.last!.cuffPressure.doubleValue!)
            / (p.last!.elapsed - p[peakIndex].elapsed)
        #expect((12...18).contains(inflateRate))
        #expect((2.5...3.5).contains(deflateRate))
        let m = c.items.compactMap { if case let .measurement(m) = $0 { m } else { nil } }.first!
        let over = p[peakIndex].cuffPressure.doubleValue! - m.systolic.doubleValue!
        #expect((28...42).contains(over))
    }
}

/// The paced clock of `cuff simulate` and `cuff measure --simulated --speed`: at a speed far from
/// 1, its times saturate at the ends of `Timestamp`'s range instead of trapping (they once
/// converted an out-of-range Double with `Int64(_:)`).
@Suite("Simulation clock")
struct SimulationClockTests {
    let start = Timestamp(nanoseconds: 1_000_000_000)

    @Test func itRunsSpeedTimesFaster() {
        let c = SimulationClock(speed: 4, start: start)
        #expect(c.simulated(start + .seconds(3)) == start + .seconds(12))
        #expect(c.simulated(start) == start)
    }

    @Test func aHugeSpeedSaturatesTheSimulatedTime() {
        let c = SimulationClock(speed: 1e300, start: start)
        #expect(c.simulated(start + .seconds(1)).nanoseconds == .max)
        #expect(c.simulated(start) == start)
        // A deadline a year away in simulated time is no real time away.
        #expect(c.realInterval(until: start + .seconds(31_536_000)) == .zero)
    }

    @Test func aTinySpeedSaturatesTheRealInterval() {
        let c = SimulationClock(speed: 1e-300, start: MonotonicClock.now())
        // 1 simulated second is 1e300 real seconds: the most a Duration of nanoseconds holds.
        #expect(c.realInterval(until: c.now() + .seconds(1)).nanoseconds == .max)
    }
}
