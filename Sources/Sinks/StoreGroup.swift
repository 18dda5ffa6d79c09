// SPDX-License-Identifier: GPL-2.0-or-later
import CuffSession
import StoreFormat

/// Several stores as one (`--store` beside `--publish`, or several `--publish`): a reading is kept
/// by every store, in order, before ``insert(_:)`` returns, so before the cuff is confirmed.
///
/// A reading counts as known (``knownKeys()``) only when every store has it, so a store that missed
/// it (a publisher added later) still gets it when the cuff sends it again.
public final class StoreGroup: MeasurementStore {
    public let stores: [any MeasurementStore]

    public init(_ stores: [any MeasurementStore]) { self.stores = stores }

    public var storeName: String { stores.map(\.storeName).joined(separator: ", ") }

    public func knownKeys() throws(SinkError) -> Set<String> {
        var keys: Set<String>? = nil
        for s in stores {
            let k = try s.knownKeys()
            keys = keys.map { $0.intersection(k) } ?? k
        }
        return keys ?? []
    }

    /// The lowest of the stores' numbers (nil when one has none): each store gets what it misses.
    public func lastSequenceNumber(address: String) throws(SinkError) -> UInt16? {
        var lowest: UInt16? = nil
        for (i, s) in stores.enumerated() {
            guard let n = try s.lastSequenceNumber(address: address) else { return nil }
            lowest = i == 0 ? n : min(lowest ?? n, n)
        }
        return lowest
    }

    /// New when any store had not kept it.
    @discardableResult
    public func insert(_ m: MeasurementRecord) throws(SinkError) -> StoreInsertOutcome {
        var outcome = StoreInsertOutcome.duplicate
        for s in stores {
            let o = try s.insert(m)
            if !outcome.isNew { outcome = o }
        }
        return outcome
    }

    @discardableResult
    public func insert(contentsOf ms: [MeasurementRecord]) throws(SinkError) -> Int {
        var n = 0
        for s in stores { n = max(n, try s.insert(contentsOf: ms)) }
        return n
    }

    /// The first store's history.
    public func history() throws(SinkError) -> [StoredMeasurement] { try stores.first?.history() ?? [] }

    public func write(_ o: SessionOutput) throws(SinkError) {
        for s in stores { try s.write(o) }
    }

    /// Finishes every store, even after one fails; throws the first failure.
    public func finish() throws(SinkError) {
        var first: SinkError? = nil
        for s in stores {
            do throws(SinkError) { try s.finish() } catch { if first == nil { first = error } }
        }
        if let first { throw first }
    }
}
