// SPDX-License-Identifier: GPL-2.0-or-later
import Capture
import CuffSession
import Sinks

/// Hands a replay's outputs to the presenter and the sinks; counts warnings, remembers a sink failure.
/// Used by one thread at a time (the replay's, or the pipe's writer thread).
final class ReplayDrain: @unchecked Sendable {
    let presenter: ReplayPresenter
    let sinks: ReplaySinks
    private(set) var warnings = 0
    private(set) var sinkFailed = false

    /// Whether the presenter is handed records (``ReplayJob/showAll``); notices, warnings and
    /// log lines it always gets.
    let showsRecords: Bool

    init(presenter: ReplayPresenter, sinks: ReplaySinks, showsRecords: Bool = true) {
        self.presenter = presenter
        self.sinks = sinks
        self.showsRecords = showsRecords
    }

    /// Shows outputs whose records were already serialised elsewhere (a parallel replay's): the
    /// presenter gets them as ``drain(_:)`` gives them.
    func show(_ outputs: [CaptureReplay.Output]) {
        for o in outputs { show(o) }
        presenter.flush()
    }

    /// One output to the presenter; a warning is counted.
    private func show(_ o: CaptureReplay.Output) {
        if case .warning = o { warnings += 1 }
        presenter.show(o)
    }

    /// Writes NDJSON already serialised; false (and the failure reported) when stdout fails.
    func write(serialized bytes: UnsafeRawBufferPointer, to sink: ReplayNDJSONSink) -> Bool {
        if sinkFailed { return false }
        do {
            try sink.write(serialized: bytes)
            return true
        } catch {
            return failed(error)
        }
    }

    /// Shows each output, then hands each record to the sinks. False once a sink failed (the
    /// outputs after it are dropped).
    func drain(_ outputs: [CaptureReplay.Output]) -> Bool {
        if sinkFailed { return false }
        defer { presenter.flush() }
        if let direct = sinks.direct { return drain(outputs, into: direct) }
        for o in outputs {
            show(o)
            guard case let .emit(e) = o else { continue }
            do {
                if let direct = sinks.direct { try direct.write(e) } else { try sinks.fan.write(e) }
            } catch {
                return failed(error)
            }
        }
        return true
    }

    /// ``drain(_:)`` into stdout's NDJSON alone: each output read in place, a progress record's
    /// fields straight from the batch (matched on its own, not as one arm of a switch over every
    /// output: that copied each output's record out of the batch and destroyed the copy).
    private func drain(_ outputs: [CaptureReplay.Output], into direct: ReplayNDJSONSink) -> Bool {
        let showsRecords = self.showsRecords
        return outputs.withUnsafeBufferPointer { b in
            for i in b.indices {
                do throws(SinkError) {
                    if case let .emit(.progress(p)) = b[i] {
                        if showsRecords { presenter.show(b[i]) }
                        try direct.write(progress: p)
                        continue
                    }
                    if case let .emit(e) = b[i] {
                        if showsRecords { presenter.show(b[i]) }
                        try direct.write(e)
                    } else {
                        show(b[i])
                    }
                } catch {
                    return failed(error)
                }
            }
            return true
        }
    }

    /// A sink failed: said once (through the presenter), remembered, and the replay stops writing.
    private func failed(_ error: SinkError) -> Bool {
        presenter.flush()
        presenter.sinkFailed(error)
        sinkFailed = true
        return false
    }
}
