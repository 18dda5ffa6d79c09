// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// A session and a simulated cuff joined in process, on a virtual clock: the session's writes are
/// the cuff's events and the cuff's notifications the session's, in order; when both are quiet,
/// the clock jumps to the session's timer. Nothing sleeps.
public struct OmronInProcessLink: Sendable {
    public var cuff: OmronSimulator
    public var session: OmronSession
    public private(set) var now: Timestamp
    /// Seconds of local time at `now == .zero`.
    public let localOrigin: Int64
    public private(set) var readings: [OmronSyncedReading] = []
    public private(set) var clockReports: [(cuff: Int64?, drift: Int64?)] = []
    public private(set) var badRecords: [OmronError] = []
    /// The session left the unread counters alone (a slot did not decode).
    public private(set) var countersKept = false
    /// The statuses the cuff refused clock writes with.
    public private(set) var clockRefusals: [UInt8] = []
    /// Every frame the session wrote, as (characteristic, bytes), for tests and traces.
    public private(set) var trace: [(OmronCharacteristic, [UInt8])] = []

    public init(cuff: OmronSimulator, session: OmronSession, now: Timestamp = .zero, localOrigin: Int64) {
        self.cuff = cuff
        self.session = session
        self.now = now
        self.localOrigin = localOrigin
    }

    public var local: Int64 { localOrigin + Int64(now.nanoseconds / 1_000_000_000) }

    /// Runs the session to its end (or `maxSteps` events) and returns its outcome.
    public mutating func run(maxSteps: Int = 1_000_000) -> OmronSessionOutcome? {
        var events: [OmronSession.Event] = [.start]
        var timer: Timestamp?
        var steps = 0
        while steps < maxSteps {
            steps += 1
            let event: OmronSession.Event
            if !events.isEmpty {
                event = events.removeFirst()
            } else if let t = timer {
                now = max(now, t)
                timer = nil
                event = .timer
            } else {
                return nil
            }
            for a in session.handle(event, now: now) {
                switch a {
                case let .subscribe(c):
                    _ = cuff.handle(.subscribe(c), localSeconds: local)
                case let .write(c, bytes):
                    trace.append((c, bytes))
                    for r in cuff.handle(.write(c, bytes), localSeconds: local) {
                        switch r {
                        case let .notify(ch, b): events.append(.notified(ch, b))
                        case .disconnect: events = [.disconnected]
                        }
                    }
                case let .setTimer(t): timer = t
                case let .clock(c, d): clockReports.append((c, d))
                case let .clockRefused(status): clockRefusals.append(status)
                case let .reading(r): readings.append(r)
                case let .badRecord(_, _, e): badRecords.append(e)
                case .countersKept: countersKept = true
                case let .finished(o):
                    _ = cuff.handle(.disconnected, localSeconds: local)
                    return o
                }
            }
        }
        return nil
    }

    /// A new session with `options` on the same cuff, `after` later.
    public mutating func reconnect(_ options: OmronSyncOptions, after: Duration = .seconds(60)) {
        now = now + after
        session = OmronSession(profile: cuff.profile, options: options, localSeconds: local)
        readings = []
        clockReports = []
        clockRefusals = []
        badRecords = []
        trace = []
    }
}
