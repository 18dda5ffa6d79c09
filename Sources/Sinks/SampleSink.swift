// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import CuffSession
import Synchronization
import Transport

#if canImport(Glibc)
    import Glibc
#endif

/// Where a session's results go.
///
/// Contract: when `write(.measurement(_))` returns, the record is durable in that sink (flushed to
/// the file descriptor, committed to disk). The session confirms the indication to the cuff only
/// after every sink returned, so a throw means "not kept; let the cuff send it again".
public protocol SampleSink: AnyObject {
    func write(_ output: SessionOutput) throws(SinkError)
    /// Flushes and releases what the sink holds; later writes throw ``SinkError/finished(sink:)``.
    func finish() throws(SinkError)
}

/// Something a sink dropped or changed on the way out, for humans (stderr), never on stdout.
public struct SinkWarning: Sendable, Hashable, CustomStringConvertible {
    /// `fhir`, `omh`, `store`.
    public var sink: String
    public var message: String
    /// The measurement concerned, when there is one (for callers that match it; not printed: the
    /// key holds the reading's values, and warnings go to logs).
    public var dedupKey: String?

    public init(sink: String, message: String, dedupKey: String? = nil) {
        self.sink = sink
        self.message = message
        self.dedupKey = dedupKey
    }

    public var description: String { "warning: \(sink): \(message)" }
}

/// Receives ``SinkWarning``s.
public typealias SinkWarningHandler = @Sendable (SinkWarning) -> Void

public enum SinkWarnings {
    /// Writes `warning: …` lines to stderr (unbuffered `write(2)`).
    public static let standardError: SinkWarningHandler = { w in
        Sys.writeAll(2, TerminalText.escapingControlCharacters(w.description) + "\n")
    }

    /// Drops warnings.
    public static let ignore: SinkWarningHandler = { _ in }
}

/// Collects warnings in memory (tests, or a caller that reports them later).
public final class WarningCollector: Sendable {
    private let items = Mutex<[SinkWarning]>([])
    public init() {}
    public var handler: SinkWarningHandler { { [self] w in items.withLock { $0.append(w) } } }
    public var warnings: [SinkWarning] { items.withLock { $0 } }
}

/// Writes every output to several sinks in order, stopping at the first that throws.
///
/// Put the store first: if it cannot keep a measurement, nothing is printed either, and the cuff's
/// retransmission is printed once. With `skipsStoredDuplicates`, a measurement that an
/// ``MeasurementStore`` among the sinks already held (same dedup key) is not passed to the sinks after it.
public final class FanOutSink: SampleSink, Sendable {
    public let sinks: [any SampleSink & Sendable]
    public let skipsStoredDuplicates: Bool

    public init(_ sinks: [any SampleSink & Sendable], skipsStoredDuplicates: Bool = false) {
        self.sinks = sinks
        self.skipsStoredDuplicates = skipsStoredDuplicates
    }

    public func write(_ output: SessionOutput) throws(SinkError) {
        guard skipsStoredDuplicates, case let .measurement(m) = output else {
            for s in sinks { try s.write(output) }
            return
        }
        for s in sinks {
            if let store = s as? any MeasurementStore {
                if try store.insert(m) == .duplicate { return }
            } else {
                try s.write(output)
            }
        }
    }

    /// Finishes every sink, even after one fails; throws the first failure.
    public func finish() throws(SinkError) {
        var first: SinkError? = nil
        for s in sinks {
            do throws(SinkError) { try s.finish() } catch { if first == nil { first = error } }
        }
        if let first { throw first }
    }
}

/// Tracks `finish()` for a sink.
struct FinishGuard: ~Copyable {
    let state = Mutex(false)
    let name: String
    init(_ name: String) { self.name = name }
    func check() throws(SinkError) {
        if state.withLock({ $0 }) { throw .finished(sink: name) }
    }
    func finish() throws(SinkError) {
        let was = state.withLock { s -> Bool in
            let w = s
            s = true
            return w
        }
        if was { throw .finished(sink: name) }
    }
}

/// The default format: every output as its one-line JSON (`SessionOutput.json`), flushed per write.
public final class NDJSONSink: SampleSink, Sendable {
    public let output: any LineOutput
    private let done = FinishGuard("ndjson")
    /// Writes each record's line straight as bytes: the same bytes as `o.json.serialized()` (the
    /// line buffer `cuff replay` uses; CaptureTests' ShortPathTests hold the two equal), without
    /// building the JSON tree first, which was about a quarter of `cuff watch`'s CPU per reading
    /// under callgrind.
    private let lines = Mutex(NDJSONLineBuffer(capacity: 4096))

    public init(output: any LineOutput) { self.output = output }

    public func write(_ o: SessionOutput) throws(SinkError) {
        try done.check()
        let line = lines.withLock { b -> String in
            b.removeAll()
            b.append(o)
            let bytes = b.bytes
            // (less its newline)
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[..<(bytes.count - 1)]), as: UTF8.self)
        }
        try output.writeLine(line)
        try output.flush()
    }

    public func finish() throws(SinkError) {
        try done.finish()
        try output.flush()
    }
}
