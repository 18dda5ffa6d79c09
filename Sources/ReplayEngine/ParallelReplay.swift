// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import Capture
import CuffCore
import CuffSession
import Sinks
import Transport

/// `cuff replay` of a btsnoop file on several threads, with the same output as one replay.
///
/// This thread reads the file and cuts it at quiet points (``QuietPoints``: no connection open, so
/// a fresh ``CaptureReplay`` started there is in the state the whole replay would be in). Worker
/// threads replay the stretches between cuts, each with its own replay, and serialise their
/// NDJSON; this thread writes the stretches' bytes in file order and shows their progress and
/// warnings in order. A stretch ends at the first quiet point past ``segmentBytes``; one that finds
/// none within ``maximumPendingBytes`` (connections that never close) makes the parallel part stop
/// at its start: everything written so far stands, and the caller replays the rest from
/// ``Outcome/resumeAt`` on one thread (starting from ``Outcome/learned``). Memory stays bounded: at most
/// ``maximumInFlight`` stretches are read ahead.
///
/// The one state a quiet point does not clear is the handle maps earlier discoveries left
/// (``CaptureReplay/learned``: a bonded reconnect uses them). A worker replays its stretch without
/// them, or from the maps learned when it was handed out (those of the stretches written by then).
/// When that replay says a connection needed one it lacked (``CaptureReplay/lacking``) and the
/// stretches before it had learned one for that peer, or used one (``CaptureReplay/inheritedPeers``)
/// that a later discovery replaced, this thread replays the stretch again with the maps learned
/// so far, so the output is the one-thread replay's. A replacement with the same handles (a cuff
/// that is discovered again now and then, with reconnects between) changes only the notices that
/// name where the map was discovered: those are written again instead.
final class ParallelReplay: @unchecked Sendable {
    struct Segment: Sendable {
        var index: Int
        var bytes: [UInt8]
        var offset: Int64
        /// The capture ends with this stretch (its replay finishes).
        var last: Bool
        /// A read error that came after these bytes: the stretch's replay ends with it.
        var fault: CaptureError?
        /// The handle maps learned before the stretches written when this one was handed out (the
        /// replay starts from them; it is replayed again if a connection used one that is not the
        /// one the one-thread replay has there, but for where it was discovered).
        var learned: [CaptureReplay.Peer: DiscoveredHandles] = [:]
    }

    struct Result: @unchecked Sendable {
        /// The stretch's NDJSON (the buffer it was written into, handed over whole).
        var ndjson: NDJSONLineBuffer
        /// What the display and the warning count need, in order (logs and emits only when not quiet).
        var shown: [CaptureReplay.Output]
        var sessions: Int
        var measurements: Int
        var unmapped: [CaptureReplay.Unmapped]
        var fault: CaptureError?
        /// The stretch's bytes, for reuse (and for a second replay with the maps learned before it).
        var bytes: [UInt8]
        var offset: Int64
        var last: Bool
        var readFault: CaptureError?
        /// The handle maps learned in the stretch, and the peers that lacked one.
        var learned: [CaptureReplay.Peer: DiscoveredHandles]
        var lacking: Set<CaptureReplay.Peer>
        /// The maps the replay started from, the peers that used one of them, and those it learned itself.
        var startedFrom: [CaptureReplay.Peer: DiscoveredHandles]
        var inherited: Set<CaptureReplay.Peer>
        var discovered: Set<CaptureReplay.Peer>
        /// The connections that used one of the maps it started from (each said so in a notice).
        var inheritedUses: Set<CaptureReplay.InheritedUse>
    }

    struct Outcome {
        var sessions = 0
        var measurements = 0
        var unmapped: [CaptureReplay.Unmapped] = []
        var fault: CaptureError?
        /// The writer failed (the replay stopped; the error was reported).
        var sinkFailed = false
        /// Where to go on with a one-thread replay (no quiet point came); nil when the capture was done.
        var resumeAt: Int64?
        /// The handle maps learned up to there (the one-thread replay starts from them).
        var learned: [CaptureReplay.Peer: DiscoveredHandles] = [:]
    }

    let path: String
    let datalink: BTSnoopDatalink
    let configuration: CuffSessionConfiguration
    let adapter: UInt16?
    let overrides: [UInt16: CuffCharacteristic]
    let showAll: Bool
    let segmentBytes: Int
    let maximumPendingBytes: Int
    let maximumInFlight: Int

    /// What this thread and the workers share.
    private struct Shared: @unchecked Sendable {
        var queue: [Segment] = []
        var results: [Int: Result] = [:]
        var closed = false
        /// Buffers come back after use (fewer fresh allocations, and the heap of each thread does
        /// not keep growing with buffers freed by another): NDJSON buffers and stretch bytes.
        var spareLines: [NDJSONLineBuffer] = []
        var spareBytes: [[UInt8]] = []
    }

    private let shared = ConditionLock(Shared())
    private var workers: [OSThread] = []

    init(
        path: String, datalink: BTSnoopDatalink, configuration: CuffSessionConfiguration, adapter: UInt16?,
        overrides: [UInt16: CuffCharacteristic], showAll: Bool, threads: Int, segmentBytes: Int
    ) {
        self.path = path
        self.datalink = datalink
        self.configuration = configuration
        self.adapter = adapter
        self.overrides = overrides
        self.showAll = showAll
        self.segmentBytes = min(max(segmentBytes, 1), ReplayJob.largestSegmentBytes)
        // Small: a capture whose connections stay open (a gateway's log of links never closed) is
        // scanned this far before the one-thread replay takes it, and that scan is all the time
        // the parallel attempt costs it (16 MB took 35 ms of a 50 ms replay; 1 MB, under 1 ms).
        maximumPendingBytes = Self.maximumPendingBytes(segmentBytes: self.segmentBytes)
        maximumInFlight = threads + 2
        for _ in 0..<threads {
            if let t = OSThread.start({ [self] in work() }) { workers.append(t) }
        }
    }

    /// How far a stretch is read looking for its end before one thread takes the rest.
    static func maximumPendingBytes(segmentBytes: Int) -> Int {
        max(1 << 20, 4 * segmentBytes)
    }

    /// Whether the capture from `offset` (the first record) has a quiet point at least
    /// `segmentBytes` in, within ``maximumPendingBytes(segmentBytes:)``: where the parallel replay
    /// would cut its first stretch. Without one it would only read that far, give up and leave the
    /// file to one thread, after starting its threads and filling its buffers for nothing (on a
    /// 100 MB capture of links that never close, 780 more page faults and about 3 % more time than
    /// `--jobs 1`). This looks through one small buffer, record after record, keeping nothing.
    /// A read error or a record no reader gets past is "no" (the one-thread replay reports it).
    static func cutsEarly(path: String, offset: Int64, datalink: BTSnoopDatalink, segmentBytes: Int) -> Bool {
        guard let source = try? FileByteSource(path: path, offset: offset) else { return false }
        let segmentBytes = min(max(segmentBytes, 1), ReplayJob.largestSegmentBytes)
        let window = maximumPendingBytes(segmentBytes: segmentBytes)
        let chunk = 64 << 10
        var points = QuietPoints(datalink: datalink)
        var buffer: [UInt8] = []
        buffer.reserveCapacity(4 * chunk)
        var consumed = 0  // bytes of whole records scanned and dropped from the buffer's front
        while consumed + buffer.count <= window {
            guard let n = try? source.read(into: &buffer, maxCount: chunk), n > 0 else { return false }
            var found = false
            let (end, stop) = buffer.withUnsafeBytes { raw in
                points.scan(raw, from: 0) { at in
                    if consumed + at >= segmentBytes { found = true }
                }
            }
            if found { return true }
            if stop { return false }
            buffer.removeFirst(end)
            consumed += end
        }
        return false
    }

    /// False when no worker thread could start (the caller replays on one thread instead).
    var started: Bool { !workers.isEmpty }

    // MARK: - Workers

    private func work() {
        let capacity = segmentBytes * 3
        while true {
            let next = shared.wait(until: { !$0.queue.isEmpty || $0.closed }) { s -> (Segment, NDJSONLineBuffer?)? in
                s.queue.isEmpty ? nil : (s.queue.removeFirst(), s.spareLines.popLast())
            }
            guard let (segment, spare) = next else { break }
            let index = segment.index, learned = segment.learned
            // The stretch's bytes go on in the result alone (see writeNext: a second reference
            // when the writer empties them for reuse makes a new buffer).
            let r = replay(consume segment, into: spare ?? NDJSONLineBuffer(capacity: capacity), learned: learned)
            shared.withLock(wakingWaiters: true) { $0.results[index] = r }
        }
    }

    /// Replays one stretch on its own, as `cuff replay` replays a whole file, from the handle maps `learned` before it.
    func replay(
        _ segment: Segment, into lines: NDJSONLineBuffer, learned: [CaptureReplay.Peer: DiscoveredHandles] = [:]
    ) -> Result {
        var replay = CaptureReplay(
            configuration: configuration, adapter: adapter, overrides: overrides, learned: learned)
        replay.recordsInheritedUses = true
        var shown: [CaptureReplay.Output] = []
        var out: [CaptureReplay.Output] = []
        out.reserveCapacity(1024 + 64)
        let showAll = self.showAll
        func take(_ out: inout [CaptureReplay.Output]) -> Bool {
            out.withUnsafeBufferPointer { b in
                // A progress line (most of a capture's outputs) matched on its own and written in
                // one go, read in place (as ReplayDrain does).
                for i in b.indices {
                    if !showAll, case let .emit(.progress(p)) = b[i] {
                        lines.append(progress: p)
                        continue
                    }
                    let o = b[i]
                    switch o {
                    case let .emit(e):
                        lines.append(e)
                        if showAll { shown.append(o) }
                    case .log:
                        if showAll { shown.append(o) }
                    case .warning, .notice:
                        shown.append(o)
                    }
                }
            }
            out.removeAll(keepingCapacity: true)
            return true
        }
        var fault: CaptureError?
        do {
            // One chunk: the reader takes the stretch's bytes whole, without copying them.
            var reader = CaptureReader(
                btsnoopRecords: ArrayByteSource(segment.bytes), datalink: datalink, offset: segment.offset,
                chunkSize: max(segment.bytes.count, 64 * 1024))
            // Progress lines (most of the stretch) written as the replay makes them, when the
            // display does not show them too.
            let progress: (any ProgressRecordSink)? = showAll ? nil : lines
            if case let .fault(e) = replay.replay(&reader, into: &out, batch: 1024, progress: progress, deliver: take) {
                fault = e
            }
        }  // (the reader's copy of the bytes goes here, so they come back unshared)
        if fault == nil { fault = segment.fault }
        if segment.last || fault != nil {
            replay.finish(after: fault, into: &out)
        }
        _ = take(&out)
        return Result(
            ndjson: lines, shown: shown, sessions: replay.sessions, measurements: replay.measurements,
            unmapped: replay.unmapped, fault: fault, bytes: segment.bytes, offset: segment.offset, last: segment.last,
            readFault: segment.fault, learned: replay.learned, lacking: replay.lacking, startedFrom: learned,
            inherited: replay.inheritedPeers, discovered: replay.discoveredPeers, inheritedUses: replay.inheritedUses)
    }

    // MARK: - Reading, cutting, writing (this thread)

    private var outcome = Outcome()
    private var dispatched = 0
    private(set) var written = 0
    private var stopped = false
    /// Stretches replayed a second time, of those written (the parallel part gives up when most are).
    private(set) var replayedAgain = 0
    /// Stretches written before the share replayed again is judged.
    static let judgedAfter = 16
    private var write: (Result) -> Bool = { _ in true }

    /// Writes the next stretch's result when it is ready (waiting for it when `wait`); false if it was not.
    private func writeNext(wait: Bool) -> Bool {
        let index = written
        let ready: Result? =
            wait
            ? shared.wait(until: { $0.results[index] != nil }) { $0.results.removeValue(forKey: index) }
            : shared.withLock { $0.results.removeValue(forKey: index) }
        // (Consumed: `r` then holds the stretch's bytes alone. With `ready` still holding them,
        // emptying them for reuse below made a new buffer, and `ready` then freed the old one at
        // the top of this thread's heap, which glibc gave back to the system: 86 % of a 1 GB
        // replay's page faults, about 20,000 of them, and 88 `brk` calls.)
        guard var r = consume ready else { return false }
        written += 1
        // Maps that a stretch written since this one was handed out discovered again, the
        // same but for where: only the notices that name where change.
        var renamed: [CaptureReplay.Peer: DiscoveredHandles] = [:]
        if !stopped,
            r.lacking.contains(where: { outcome.learned[$0] != nil })
                || r.inherited.contains(where: { p in
                    guard let now = outcome.learned[p], let then = r.startedFrom[p], now != then else { return false }
                    // (A map learned before the stretch was discovered before it: the notices
                    // that name it name an offset no notice of a map discovered in it names.)
                    guard let at = then.openedAt, at < r.offset, now.sameHandles(as: then) else { return true }
                    renamed[p] = now
                    return false
                })
                || outcome.learned.count + r.learned.keys.filter({ outcome.learned[$0] == nil }).count
                    > CaptureReplay.maximumLearnedPeers
        {
            // A connection in the stretch would have used a map an earlier stretch learned, or used
            // one that a stretch written since it was handed out replaced with other handles (or
            // the stretch learned peers the one-thread replay has no room left for): replay it
            // again from what was learned before it (what the one-thread replay knows there).
            r.ndjson.removeAll()
            let segment = Segment(
                index: written - 1, bytes: r.bytes, offset: r.offset, last: r.last, fault: r.readFault)
            r = replay(segment, into: r.ndjson, learned: outcome.learned)
            replayedAgain += 1
        } else if !stopped, !renamed.isEmpty {
            // The notices of the connections that used them, as the one-thread replay writes them.
            var notices: [String: String] = [:]
            for use in r.inheritedUses {
                guard let now = renamed[use.peer], let then = r.startedFrom[use.peer] else { continue }
                notices[CaptureReplay.inheritedNotice(use, from: then)] = CaptureReplay.inheritedNotice(use, from: now)
            }
            for i in r.shown.indices {
                if case let .notice(s) = r.shown[i], let n = notices[s] { r.shown[i] = .notice(n) }
            }
        }
        if !stopped {
            for p in r.discovered { outcome.learned[p] = r.learned[p] }
        }
        defer {
            r.ndjson.removeAll()
            r.bytes.removeAll(keepingCapacity: true)
            let (lines, bytes) = (r.ndjson, r.bytes)
            shared.withLock { s in
                s.spareLines.append(lines)
                s.spareBytes.append(bytes)
            }
        }
        guard !stopped else { return true }
        outcome.sessions += r.sessions
        outcome.measurements += r.measurements
        outcome.unmapped += r.unmapped
        if !write(r) {
            outcome.sinkFailed = true
            stopped = true
        }
        if let f = r.fault {
            outcome.fault = f
            stopped = true  // nothing after a fault is replayed
        }
        return true
    }

    /// A buffer for a stretch's bytes: one that came back, or a new one.
    private func spareBytes() -> [UInt8] {
        shared.withLock { $0.spareBytes.popLast() } ?? []
    }

    /// Hands `bytes` (the stretch's own buffer, not copied) to the workers.
    private func dispatch(_ bytes: consuming [UInt8], at offset: Int64, last: Bool, fault: CaptureError? = nil) {
        while dispatched - written >= maximumInFlight { _ = writeNext(wait: true) }
        let segment = Segment(
            index: dispatched, bytes: bytes, offset: offset, last: last, fault: fault, learned: outcome.learned)
        shared.withLock(wakingWaiters: true) { $0.queue.append(segment) }
        dispatched += 1
    }

    /// Replays the file from `offset` (the first record, after the file header); `write` takes each
    /// stretch's NDJSON and display outputs in order and returns false when the sink failed.
    func run(from offset: Int64, write: @escaping (Result) -> Bool) -> Outcome {
        self.write = write
        defer { self.write = { _ in true } }
        let source: FileByteSource
        do {
            source = try FileByteSource(path: path, offset: offset)
        } catch {
            outcome.fault = error
            finishAll()
            return outcome
        }
        var points = QuietPoints(datalink: datalink)
        // The file from `start` on, read but not yet handed out. It is read straight into the
        // buffer the next stretch takes: at a cut the buffer itself is handed over, and only the
        // bytes after the cut are copied (into the next one).
        var pending = spareBytes()
        var start = offset
        var scanned = 0  // bytes of `pending` scanned (whole records)
        var cuts: [Int] = []  // where this round's stretches end (quiet points, each ≥ segmentBytes past the last)
        // Reads small next to a stretch: what follows a cut (copied) stays short.
        let chunk = 64 << 10
        while !stopped {
            if pending.capacity == 0 { pending.reserveCapacity(segmentBytes + 2 * chunk) }
            var end = false
            var readError: CaptureError?
            do {
                if try source.read(into: &pending, maxCount: chunk) == 0 { end = true }
            } catch {
                readError = error
            }
            var cutAt: Int?  // past a header no reader gets past: the capture stops there
            cuts.removeAll(keepingCapacity: true)
            pending.withUnsafeBytes { raw in
                var last = 0
                let segmentBytes = self.segmentBytes
                let (end, stop) = points.scan(raw, from: scanned) { at in
                    if at - last >= segmentBytes {
                        cuts.append(at)
                        last = at
                    }
                }
                scanned = end
                if stop { cutAt = min(raw.count, scanned + BTSnoop.recordHeaderLength) }
            }
            // The stretches that end at this round's cuts: the first in `pending` itself, the
            // others (only with stretches shorter than a read) and the rest copied out.
            if let first = cuts.first, let final = cuts.last {
                var pieces: [(bytes: [UInt8], at: Int)] = []
                for i in cuts.indices.dropFirst() {
                    var piece = spareBytes()
                    piece.append(contentsOf: pending[cuts[i - 1]..<cuts[i]])
                    pieces.append((piece, cuts[i - 1]))
                }
                var rest = spareBytes()
                if rest.capacity == 0 { rest.reserveCapacity(segmentBytes + 2 * chunk) }
                rest.append(contentsOf: pending[final...])
                pending.removeLast(pending.count - first)
                swap(&pending, &rest)
                dispatch(rest, at: start, last: false)
                for p in pieces { dispatch(p.bytes, at: start + Int64(p.at), last: false) }
                start += Int64(final)
                scanned -= final
                if let c = cutAt { cutAt = c - final }
            }
            if let readError {
                // The records read whole, then the error, as a one-thread reader gives them.
                pending.removeLast(pending.count - scanned)
                dispatch(pending, at: start, last: true, fault: readError)
                pending = []
                break
            }
            if end || cutAt != nil {
                if let c = cutAt { pending.removeLast(pending.count - c) }
                dispatch(pending, at: start, last: true)
                pending = []
                break
            }
            if pending.count > maximumPendingBytes {
                // Connections that stay open: from the last cut on, one thread. (Not from the
                // last quiet point: the stretch up to it would go to a worker, and the one-thread
                // replay could only start once it came back.)
                outcome.resumeAt = start
                break
            }
            while writeNext(wait: false) {}
            if written >= Self.judgedAfter, replayedAgain * 2 > written {
                // Most stretches had to be replayed again with what an earlier one learned (each
                // discovery is followed by reconnects that use it, and the learning keeps
                // changing): one thread does the rest in half the work.
                outcome.resumeAt = start
                break
            }
        }
        finishAll()
        if stopped { outcome.resumeAt = nil }
        return outcome
    }

    /// Writes every stretch still out, then ends the workers.
    private func finishAll() {
        while written < dispatched { _ = writeNext(wait: true) }
        shared.withLock(wakingWaiters: true) { $0.closed = true }
        for t in workers { t.join() }
        workers = []
    }
}
