// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import CuffLogging
import CuffSession
import Logging
import Transport

/// The records of many sessions, kept with one commit per loop turn (`cuff watch`).
///
/// Sessions hand their records over in order (``enqueue(_:from:)``); a session that handed over a
/// measurement waits. After each loop turn ``flush()`` keeps every new measurement of the turn in
/// one call to `commit` (one transaction, one fsync), writes the turn's records to `write` (stdout),
/// then lets the waiting sessions confirm. A measurement already kept (same dedup key: a cuff that
/// sends a stored reading again, or two hubs) is confirmed without being kept or printed twice.
///
/// A commit that fails (a full disk) leaves the turn's measurements unconfirmed, so the cuffs keep
/// them and send them again; the failure is reported once per kind (the store's error, never a
/// reading), and once more when the store keeps readings again.
public final class Collector: MeasurementCommitter {
    /// Keeps measurements durably, all or none (the store's transaction).
    public typealias Commit = ([MeasurementRecord]) throws -> Void
    /// Writes one record to the output (stdout), after its measurements were committed.
    public typealias Write = (SessionOutput) throws -> Void

    let commit: Commit?
    let write: Write
    var queue: [(SessionOutput, CentralConnection?)] = []
    /// Dedup keys of every measurement kept (from the store at start, then every commit).
    public private(set) var knownKeys: Set<String>
    /// The highest stored-record sequence number kept per device address (RACP "newer than").
    var lastSequence: [String: UInt16] = [:]
    public private(set) var stored = 0
    public private(set) var duplicates = 0
    /// Measurements that could not be kept (not confirmed; their cuffs send them again).
    public private(set) var failures = 0
    /// Why the store fails now (its error, no values), until a commit succeeds again.
    public private(set) var storeFailure: String?
    /// Whether a commit (or, without a store, the output) failed at any time: exit status 10.
    public private(set) var sinkFailed = false
    /// Hears of the store failing (once per kind of failure) and keeping readings again.
    let log: Logger
    /// Commit latency (from a measurement's arrival to its commit), for the summary line.
    public private(set) var latency = LatencyHistogram()
    let wallClock: WallClock

    /// - Parameters:
    ///   - commit: the store's batch insert; nil when there is no store (the output is the sink).
    ///   - write: the output sink.
    ///   - knownKeys: the dedup keys the store holds already.
    ///   - log: told when the store starts failing (once per kind of failure, `.error`) and when it keeps readings again (`.notice`).
    public init(
        commit: Commit?, write: @escaping Write, knownKeys: Set<String> = [], wallClock: WallClock = .system,
        log: Logger = .silent
    ) {
        self.commit = commit
        self.write = write
        self.knownKeys = knownKeys
        self.wallClock = wallClock
        self.log = log
    }

    public func enqueue(_ output: SessionOutput, from connection: CentralConnection) {
        queue.append((output, connection))
    }

    /// A record that belongs to no session (none today; kept for symmetry with `enqueue`).
    public var pending: Int { queue.count }

    /// The sequence number to ask the cuff for records after (nil: ask for all).
    public func lastSequenceNumber(address: String) -> UInt16? { lastSequence[address] }

    /// Seeds ``lastSequenceNumber(address:)`` (from the store, once per device).
    public func learnSequenceNumber(_ n: UInt16?, address: String) {
        guard let n, lastSequence[address].map({ n > $0 }) ?? true else { return }
        lastSequence[address] = n
    }

    /// Commits and writes what this turn collected, then resumes the sessions that wait.
    public func flush() {
        guard !queue.isEmpty else { return }
        let items = queue
        queue.removeAll(keepingCapacity: true)
        var fresh: [MeasurementRecord] = []
        var skip = Set<Int>()
        var batchKeys = Set<String>()
        for (i, (o, _)) in items.enumerated() {
            guard case let .measurement(m) = o else { continue }
            let key = m.dedupKey
            // (A stored record received live before is known by its key without the sequence number.)
            if knownKeys.contains(key)
                || m.wasKeptLive({ knownKeys.contains($0) || batchKeys.contains($0) })
                || !batchKeys.insert(key).inserted
            {
                skip.insert(i)
                duplicates += 1
            } else {
                fresh.append(m)
            }
        }
        var failure: String?
        if let commit, !fresh.isEmpty {
            do { try commit(fresh) } catch { failure = "\(error)" }
            if let failure {
                if failure != storeFailure {
                    log.error(
                        "cannot keep readings: \(failure); they stay unconfirmed on their cuffs and are tried again")
                }
                storeFailure = failure
                sinkFailed = true
            } else if storeFailure != nil {
                storeFailure = nil
                log.notice(
                    "the store keeps readings again (\(failures) not kept meanwhile, left to their cuffs to send again)"
                )
            }
        }
        if failure == nil {
            let now = wallClock.nowMicros()
            for m in fresh {
                knownKeys.insert(m.dedupKey)
                if m.stored, let s = m.sequenceNumber { learnSequenceNumber(s, address: m.device.address) }
                latency.record(micros: now - m.receivedAt.wallMicros)
            }
            stored += fresh.count
        } else {
            failures += fresh.count
        }
        // A stored record the store holds already (most often a reading taken live, sent again
        // from the cuff's memory) moves the mark too: asked for again, it would only come back
        // as a repeat (probe S: the mark never passed the live readings, and every session
        // fetched the cuff's whole memory again: 202,632 repeats for 3,817 readings).
        for i in skip {
            guard case let .measurement(m) = items[i].0, m.stored, let s = m.sequenceNumber,
                knownKeys.contains(m.dedupKey) || m.wasKeptLive({ knownKeys.contains($0) })
            else { continue }
            learnSequenceNumber(s, address: m.device.address)
        }
        for (i, (o, _)) in items.enumerated() where !skip.contains(i) {
            if failure != nil, case .measurement = o { continue }
            do {
                try write(o)
            } catch {
                // Without a store the output is the only sink: a measurement it did not take is
                // not confirmed. With a store it is kept; the output's failure is the caller's.
                if commit == nil, case .measurement = o {
                    failure = failure ?? "\(error)"
                    sinkFailed = true
                }
            }
        }
        for (i, (o, c)) in items.enumerated() {
            if case .measurement = o { c?.committed(failure: failure, new: !skip.contains(i)) }
        }
    }
}

/// Latencies in 0.1 ms steps up to 10 s (longer ones count in the last step).
public struct LatencyHistogram: Sendable {
    var buckets = [Int](repeating: 0, count: 100_001)
    public private(set) var count = 0

    public init() {}

    public mutating func record(micros: Int64) {
        let i = Int(min(max(0, micros) / 100, Int64(buckets.count - 1)))
        buckets[i] += 1
        count += 1
    }

    /// The latency (ms) below which `q` (0…1) of the samples lie; nil without samples.
    public func quantile(_ q: Double) -> Double? {
        guard count > 0 else { return nil }
        let target = max(1, Int((Double(count) * q).rounded(.up)))
        var seen = 0
        for (i, n) in buckets.enumerated() {
            seen += n
            if seen >= target { return Double(i + 1) / 10 }
        }
        return Double(buckets.count) / 10
    }
}
