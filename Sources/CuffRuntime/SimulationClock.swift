// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import Transport

/// Simulated time running `speed` times faster than the monotonic clock.
public struct SimulationClock: Sendable {
    public let speed: Double
    let realStart: Timestamp
    let simStart: Timestamp

    /// Times saturate at the ends of ``Timestamp``'s range (a speed far from 1 never traps).
    public init(speed: Double, start: Timestamp = MonotonicClock.now()) {
        precondition(speed > 0)
        self.speed = speed
        realStart = start
        simStart = start
    }

    /// The simulated now.
    public func now() -> Timestamp { simulated(MonotonicClock.now()) }

    public func simulated(_ real: Timestamp) -> Timestamp {
        simStart + .nanoseconds(Timestamp.saturating(Double((real - realStart).nanoseconds) * speed))
    }

    /// Real time until simulated `deadline` (zero when it has passed).
    public func realInterval(until deadline: Timestamp) -> Duration {
        let sim = deadline - now()
        if sim <= .zero { return .zero }
        return .nanoseconds(Timestamp.saturating(Double(sim.nanoseconds) / speed))
    }
}
