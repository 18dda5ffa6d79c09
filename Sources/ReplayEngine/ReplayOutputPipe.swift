// SPDX-License-Identifier: GPL-2.0-or-later
import Capture
import Transport

/// Batches of outputs from the replay thread to a writer thread, in order, at most two in flight.
final class ReplayOutputPipe: @unchecked Sendable {
    // Batches are reused (`spare`), so their size is free to be large: each batch handed over can
    // wake a sleeping writer (a futex call and, in a VM, an expensive cross-CPU interrupt); 8192
    // outputs (about 270 KB) make a quarter of the wake-ups 2048 did (2,333 → 933 context
    // switches on the 200 MB benchmark).
    static let batchSize = 8192

    private struct State: @unchecked Sendable {
        var queue: [[CaptureReplay.Output]] = []
        var spare: [[CaptureReplay.Output]] = []
        var closed = false
        var failed = false
    }

    private let state = ConditionLock(State())
    private var thread: OSThread?
    private let drain: ReplayDrain

    init(_ drain: ReplayDrain) {
        self.drain = drain
        thread = OSThread.start { [self] in run() }
    }

    /// True once the writer stopped on a sink failure.
    var failed: Bool { state.withLock { $0.failed } }

    /// Queues `batch` (waiting while two are queued) and gives back an empty array to fill.
    func send(_ batch: inout [CaptureReplay.Output]) {
        guard thread != nil else {  // no second thread: write here
            _ = drain.drain(batch)
            batch.removeAll(keepingCapacity: true)
            return
        }
        state.wait(until: { $0.queue.count < 2 || $0.failed }, wakingWaiters: true) { s in
            if s.failed {
                batch.removeAll(keepingCapacity: true)
            } else {
                s.queue.append(batch)
                batch = s.spare.popLast() ?? []
            }
        }
        // The writer hands batches back still holding their outputs: they are freed here, on the
        // thread that made them (freed on the writer's, each free took the allocator's lock the
        // replay thread was allocating under: futex wake-ups on 13 % of the samples).
        batch.removeAll(keepingCapacity: true)
        if batch.capacity == 0 { batch.reserveCapacity(Self.batchSize + 64) }
    }

    /// Waits until everything queued was written, and the writer thread is gone.
    func close() {
        guard let thread else { return }
        state.withLock(wakingWaiters: true) { $0.closed = true }
        thread.join()
        self.thread = nil
    }

    private func run() {
        while true {
            let next = state.wait(until: { !$0.queue.isEmpty || $0.closed }) { s -> [CaptureReplay.Output]? in
                s.queue.isEmpty ? nil : s.queue.removeFirst()
            }
            guard let batch = next else { break }
            let ok = drain.drain(batch)
            state.withLock(wakingWaiters: true) { s in
                s.spare.append(batch)
                if !ok {
                    s.failed = true
                    s.queue.removeAll()
                }
            }
        }
    }
}
