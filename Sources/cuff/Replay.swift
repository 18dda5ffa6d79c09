// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import BloodPressure
import Capture
import CuffCore
import CuffSession
import Sinks
import Transport
#if canImport(Glibc)
import Glibc
#endif

struct Replay: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replay a capture (btsnoop, pcap, pcapng) of a cuff session: print the records a live session gave.",
        discussion: """
            Reads btsnoop (1001, 1002, 2001 = btmon -w), pcap and pcapng (link types 201, 254, 256); \
            the format comes from the file's magic, or --format btsnoop|pcap|pcapng forces it (--format \
            also picks the output, ndjson, fhir or omh: --format pcap --format fhir). It follows every connection where a controller in the capture is the central, and prints the \
            session, progress and measurement records `cuff measure` would have printed, with the \
            capture's timestamps as received_at. Several connections, cuffs and controllers in one file \
            are kept apart; --adapter keeps one controller.

            A connection without service discovery (a bonded reconnect) uses the handles discovered on an \
            earlier connection to the same device on the same controller in the capture, and says so on \
            stderr. Without one it needs --handle VALUE_HANDLE=UUID, e.g. --handle 0x0012=2a35 (which also \
            wins over discovered handles); without that, cuff replay lists the handles that carried values.

            A record whose timestamp cuff cannot hold (before 1677-09-21 or after 2262-04-11, as a zeroed \
            btsnoop timestamp) is skipped with a bad_timestamp error naming its offset; timestamps that \
            run backwards are taken as they are.

            Exit status: 0 at least one measurement and no fault; 1 the capture is damaged (the records \
            before the fault are printed; the error names the file offset); 2 no measurement; 7 values \
            on handles nothing maps (use --handle); 10 a sink failed.
            """
    )

    @Argument(help: "The capture file.")
    var file: String

    @Option(name: .customLong("capture-format"), help: ArgumentHelp("The same as --format auto|btsnoop|pcap|pcapng.", visibility: .hidden), transform: { s in
        guard let f = CaptureFormat(rawValue: s) else { throw ValidationError("--capture-format takes auto, btsnoop, pcap or pcapng") }
        return f
    })
    var captureFormatOption: CaptureFormat?

    /// `--format btsnoop|pcap|pcapng|auto` (or `--capture-format`); default: from the magic.
    var captureFormat: CaptureFormat {
        sinks.captureFormatName.flatMap(CaptureFormat.init(rawValue:)) ?? captureFormatOption ?? .auto
    }

    @Option(name: .customLong("handle"), help: ArgumentHelp("Map a value handle to a characteristic: HANDLE=UUID, e.g. 0x0012=2a35 (repeatable).", valueName: "H=UUID"),
            transform: Replay.parseHandle)
    var handles: [HandleMapping] = []

    @Option(help: "Only this controller (hciN index, as in the capture).")
    var adapter: UInt16?

    @Flag(help: "Pace the replay by the capture's timestamps instead of going as fast as possible (pauses over 5 s are shortened to 5 s).")
    var realtime = false

    @OptionGroup var sinks: SinkOptions

    @Option(help: "Threads that replay a btsnoop file, stretch by stretch (1: one thread; default: one per CPU, at most 4). The output is the same.")
    var jobs: Int?

    @Option(name: .customLong("segment-bytes"), help: ArgumentHelp("Smallest stretch handed to a replay thread, in bytes (default 262144).", visibility: .hidden))
    var segmentBytes: Int?

    /// One replay thread per CPU, at most 4 (beyond that the writer and the disk set the pace).
    static var defaultJobs: Int { max(1, min(4, sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    struct HandleMapping: Sendable {
        var handle: UInt16
        var characteristic: CuffCharacteristic
    }

    static func parseHandle(_ s: String) throws -> HandleMapping {
        let parts = s.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { throw ValidationError("--handle takes HANDLE=UUID, e.g. 0x0012=2a35; got '\(s)'") }
        var h = Substring(parts[0])
        if h.hasPrefix("0x") || h.hasPrefix("0X") { h = h.dropFirst(2) }
        guard let handle = UInt16(h, radix: 16), handle > 0 else {
            throw ValidationError("--handle: '\(parts[0])' is not an attribute handle (hex, 0x0001–0xFFFF)")
        }
        var u = Substring(parts[1].lowercased())
        if u.hasPrefix("0x") { u = u.dropFirst(2) }
        let c: CuffCharacteristic?
        if let v = UInt16(u, radix: 16), u.count == 4 {
            c = CuffCharacteristic(uuid16: v)
        } else if let full = UUIDText.uuid16(of: String(u)) {
            c = CuffCharacteristic(uuid16: full)
        } else {
            c = String(u) == CuffControl.controlPointUUID.lowercased() ? .cuffControl : nil
        }
        guard let c else {
            throw ValidationError("--handle: '\(parts[1])' is not a characteristic cuff knows (2a35 2a36 2a49 2b34 2b35 2b36 2a52 2a2b 2a00 2a29 2a24 2a25 2a26)")
        }
        return HandleMapping(handle: handle, characteristic: c)
    }

    func validate() throws {
        if let jobs, !(1...64).contains(jobs) { throw ValidationError("--jobs takes a number of threads from 1 to 64; got \(jobs)") }
        if let segmentBytes, segmentBytes < 1 { throw ValidationError("--segment-bytes takes a positive number of bytes; got \(segmentBytes)") }
    }

    func run() throws {
        let display = ProgressDisplay(quiet: sinks.quiet)
        let fan: FanOutSink
        /// The only sink, when it is stdout's NDJSON (called directly: the replay's hot loop).
        let direct: ReplayNDJSONSink?
        do {
            // The store first (a record it cannot keep is not printed), then stdout; NDJSON through
            // the replay's own buffered writer (same bytes as NDJSONSink, fewer syscalls).
            var list: [any SampleSink & Sendable] = []
            if let path = sinks.store { list.append(try SQLiteStore(path: path)) }
            list.append(sinks.format == "ndjson" ? ReplayNDJSONSink(flushEachRecord: realtime || sinks.store != nil) : SinkFactory.formatSink(sinks.configuration, output: FileDescriptorOutput.standardOutput(), warn: sinks.quiet ? SinkWarnings.ignore : SinkWarnings.standardError))
            fan = FanOutSink(list)
            direct = list.count == 1 ? list[0] as? ReplayNDJSONSink : nil
        } catch {
            Output.log("cuff replay: \(error)")
            throw ExitCode(10)
        }
        var reader: CaptureReader<FileByteSource>
        do {
            reader = try CaptureReader(path: file, format: captureFormat)
        } catch {
            Output.log("cuff replay: \(error.message)")
            throw ExitCode(1)
        }
        var overrides: [UInt16: CuffCharacteristic] = [:]
        for m in handles { overrides[m.handle] = m.characteristic }
        var config = CuffSessionConfiguration(address: "")
        config.timeout = .seconds(300)
        let drain = ReplayDrain(display: display, fan: fan, direct: direct, file: file)
        var sessions = 0
        var measurements = 0
        var unmapped: [CaptureReplay.Unmapped] = []
        var fault: CaptureError?

        /// One replay over what `reader` has left. Without pacing, a second thread serialises and
        /// writes the outputs while this one reads and decodes, batch by batch, in order. With
        /// --realtime every record goes out at once.
        func sequential(_ reader: inout CaptureReader<FileByteSource>, learned: [CaptureReplay.Peer: DiscoveredHandles] = [:]) {
            var replay = CaptureReplay(configuration: config, adapter: adapter, overrides: overrides, learned: learned)
            var out: [CaptureReplay.Output] = []
            out.reserveCapacity(ReplayOutputPipe.batchSize + 64)
            let pacer = realtime ? Pacer() : nil
            let pipe = realtime ? nil : ReplayOutputPipe(drain)
            func deliver(_ out: inout [CaptureReplay.Output], force: Bool) -> Bool {
                if let pipe {
                    guard out.count >= ReplayOutputPipe.batchSize || (force && !out.isEmpty) else { return true }
                    pipe.send(&out)
                    return !pipe.failed
                }
                let ok = drain.drain(out)
                out.removeAll(keepingCapacity: true)
                return ok
            }
            let ending = replay.replay(&reader, into: &out, before: pacer.map { p in { p.wait(until: $0.timestamp) } },
                                       batch: pipe == nil ? 1 : ReplayOutputPipe.batchSize, deliver: { deliver(&$0, force: false) })
            if case let .fault(e) = ending { fault = e }
            if !(pipe?.failed ?? drain.sinkFailed) {
                replay.finish(after: fault, into: &out)
                _ = deliver(&out, force: true)
            }
            pipe?.close()
            sessions += replay.sessions
            measurements += replay.measurements
            unmapped += replay.unmapped
        }

        var headerFault: CaptureError?
        do { try reader.readHeader() } catch { headerFault = error }
        let threads = jobs ?? Replay.defaultJobs
        if let headerFault {
            fault = headerFault
        } else if let direct, threads > 1, !realtime, reader.format == .btsnoop, Replay.isRegularFile(file),
                  let datalink = reader.datalink.flatMap(BTSnoopDatalink.init(rawValue:)) {
            // A btsnoop file with NDJSON to stdout: cut at quiet points and replayed on several threads.
            let parallel = ParallelReplay(path: file, datalink: datalink, configuration: config, adapter: adapter,
                                          overrides: overrides, showAll: !sinks.quiet, threads: threads,
                                          segmentBytes: segmentBytes ?? 256 * 1024)
            if parallel.started {
                let o = parallel.run(from: reader.offset) { r in
                    drain.show(r.shown)
                    return drain.write(serialized: r.ndjson.bytes, to: direct)
                }
                sessions = o.sessions
                measurements = o.measurements
                unmapped = o.unmapped
                fault = o.fault
                if let resume = o.resumeAt {
                    do {
                        var rest = CaptureReader(btsnoopRecords: try FileByteSource(path: file, offset: resume), datalink: datalink, offset: resume)
                        sequential(&rest, learned: o.learned)
                    } catch {
                        fault = error
                    }
                }
            } else {
                sequential(&reader)
            }
        } else {
            sequential(&reader)
        }
        var sinkFailed = drain.sinkFailed
        let warnings = drain.warnings
        do { try fan.finish() } catch { _ = Output.sinkFailed("cuff replay", error); sinkFailed = true }
        display.clearGauge()
        // One hint per controller and set of handles, however many connections showed it.
        var groups: [(key: String, first: CaptureReplay.Unmapped, connections: Int, totals: [UInt16: CaptureReplay.Unmapped.Counts])] = []
        for u in unmapped {
            let key = "\(u.adapter)|\(u.address)|" + u.handles.keys.sorted().map { String($0) }.joined(separator: ",")
            if let i = groups.firstIndex(where: { $0.key == key }) {
                groups[i].connections += 1
                for (h, n) in u.handles {
                    groups[i].totals[h, default: .init()].notifications += n.notifications
                    groups[i].totals[h, default: .init()].indications += n.indications
                }
            } else {
                groups.append((key, u, 1, u.handles))
            }
        }
        for g in groups {
            let list = g.totals.keys.sorted().map { h -> String in
                let n = g.totals[h]!
                var kinds: [String] = []
                if n.indications > 0 { kinds.append("\(n.indications) indication\(n.indications == 1 ? "" : "s")") }
                if n.notifications > 0 { kinds.append("\(n.notifications) notification\(n.notifications == 1 ? "" : "s")") }
                return "\(Replay.hex4(h)) (\(kinds.joined(separator: ", ")))"
            }
            let conns = g.connections == 1 ? "connection \(Replay.hex4(g.first.connectionHandle))" : "\(g.connections) connections"
            Output.log("cuff replay: hci\(g.first.adapter) \(conns) to \(g.first.address): no service discovery in the capture, so these value handles are unknown: \(list.joined(separator: ", ")).")
            let example = g.totals.keys.sorted().map { h -> String in
                "--handle \(Replay.hex4(h))=\(g.totals[h]!.indications > 0 ? "2a35" : "2a36")"
            }.joined(separator: " ")
            Output.log("cuff replay: map them with --handle HANDLE=UUID (indications usually carry the Blood Pressure Measurement 2a35, or 2b34 enhanced; notifications the Intermediate Cuff Pressure 2a36, or 2b35), e.g. cuff replay \(file) \(example)")
        }
        if let fault {
            Output.log("cuff replay: \(file): \(Replay.describe(fault))")
        }
        if !sinks.quiet {
            Output.log("cuff replay: \(sessions) session\(sessions == 1 ? "" : "s"), \(measurements) measurement\(measurements == 1 ? "" : "s")")
        }
        if sinkFailed { throw ExitCode(Output.sinkFailureStatus) }
        if fault != nil || warnings > 0 { throw ExitCode(1) }
        if !unmapped.isEmpty { throw ExitCode(7) }
        if measurements == 0 { throw ExitCode(2) }
    }

    /// True for a regular file (one that can be read again from an offset; not a pipe or a device).
    static func isRegularFile(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
    }

    static func describe(_ e: CaptureError) -> String {
        var s = "\(e.code.rawValue)"
        if let o = e.offset { s += " at offset \(o)" }
        if !e.message.isEmpty { s += ": " + e.message }
        return s
    }

    static func hex4(_ v: UInt16) -> String {
        let s = String(v, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: max(0, 4 - s.count)) + s
    }
}

/// Hands a replay's outputs to the display and the sinks; counts warnings, remembers a sink failure.
/// Used by one thread at a time (the replay's, or the pipe's writer thread).
final class ReplayDrain: @unchecked Sendable {
    let display: ProgressDisplay
    let fan: FanOutSink
    let direct: ReplayNDJSONSink?
    let file: String
    private(set) var warnings = 0
    private(set) var sinkFailed = false

    init(display: ProgressDisplay, fan: FanOutSink, direct: ReplayNDJSONSink?, file: String) {
        self.display = display
        self.fan = fan
        self.direct = direct
        self.file = file
    }

    /// Shows outputs whose records were already serialised elsewhere (a parallel replay's): the
    /// progress display, logs and warnings, as ``drain(_:)`` does.
    func show(_ outputs: [CaptureReplay.Output]) {
        for o in outputs { show(o) }
    }

    /// One output on the display (a record, a log line), or a warning counted and printed.
    private func show(_ o: CaptureReplay.Output) {
        switch o {
        case let .emit(e): display.show(e)
        case let .log(s): display.log(s)
        case let .notice(s):
            display.clearGauge()
            Output.log("cuff replay: \(s)")
        case let .warning(w):
            warnings += 1
            Output.log("cuff replay: \(file): \(Replay.describe(w))")
        }
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
        for o in outputs {
            show(o)
            guard case let .emit(e) = o else { continue }
            do {
                if let direct { try direct.write(e) } else { try fan.write(e) }
            } catch {
                return failed(error)
            }
        }
        return true
    }

    /// A sink failed: said once, remembered, and the replay stops writing (false).
    private func failed(_ error: SinkError) -> Bool {
        _ = Output.sinkFailed("cuff replay", error)
        sinkFailed = true
        return false
    }
}

/// Batches of outputs from the replay thread to a writer thread, in order, at most two in flight.
final class ReplayOutputPipe: @unchecked Sendable {
    // Batches are reused (`spare`), so their size is free to be large: each batch handed over can
    // wake a sleeping writer (a futex call and, in a VM, an expensive cross-CPU interrupt); 8192
    // outputs (about 270 KB) make a quarter of the wake-ups 2048 did (2,333 → 933 context
    // switches on the 200 MB benchmark).
    static let batchSize = 8192
    private var mutex = pthread_mutex_t()
    private var changed = pthread_cond_t()
    private var queue: [[CaptureReplay.Output]] = []
    private var spare: [[CaptureReplay.Output]] = []
    private var closed = false
    private var failedFlag = false
    private var thread: OSThread?
    private let drain: ReplayDrain

    init(_ drain: ReplayDrain) {
        self.drain = drain
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&changed, nil)
        thread = OSThread.start { [self] in run() }
    }

    deinit {
        pthread_cond_destroy(&changed)
        pthread_mutex_destroy(&mutex)
    }

    /// True once the writer stopped on a sink failure.
    var failed: Bool {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return failedFlag
    }

    /// Queues `batch` (waiting while two are queued) and gives back an empty array to fill.
    func send(_ batch: inout [CaptureReplay.Output]) {
        guard thread != nil else {  // no second thread: write here
            _ = drain.drain(batch)
            batch.removeAll(keepingCapacity: true)
            return
        }
        pthread_mutex_lock(&mutex)
        while queue.count >= 2 && !failedFlag { pthread_cond_wait(&changed, &mutex) }
        if failedFlag {
            pthread_mutex_unlock(&mutex)
            batch.removeAll(keepingCapacity: true)
            return
        }
        queue.append(batch)
        batch = spare.popLast() ?? []
        pthread_cond_broadcast(&changed)
        pthread_mutex_unlock(&mutex)
        if batch.capacity == 0 { batch.reserveCapacity(Self.batchSize + 64) }
    }

    /// Waits until everything queued was written, and the writer thread is gone.
    func close() {
        guard let thread else { return }
        pthread_mutex_lock(&mutex)
        closed = true
        pthread_cond_broadcast(&changed)
        pthread_mutex_unlock(&mutex)
        thread.join()
        self.thread = nil
    }

    private func run() {
        pthread_mutex_lock(&mutex)
        while true {
            while queue.isEmpty && !closed { pthread_cond_wait(&changed, &mutex) }
            if queue.isEmpty { break }
            var batch = queue.removeFirst()
            pthread_mutex_unlock(&mutex)
            let ok = drain.drain(batch)
            batch.removeAll(keepingCapacity: true)
            pthread_mutex_lock(&mutex)
            spare.append(batch)
            if !ok {
                failedFlag = true
                queue.removeAll()
            }
            pthread_cond_broadcast(&changed)
        }
        pthread_mutex_unlock(&mutex)
    }
}

/// `--realtime`: sleeps so records go out at the pace of their timestamps.
///
/// Each record is due the capture's gap after the one before it (due times are chained, so the
/// sleeps' overshoot does not add up). A record stamped before the one ahead of it (a clock that
/// ran backwards) is due at once; a gap longer than ``longestPause`` (between sessions, or a
/// clock that jumped ahead by years) is shortened to it. So any timestamps a capture holds give a
/// bounded wait per record, and the arithmetic saturates.
final class Pacer {
    static let longestPause = Duration.seconds(5)
    var previous: (capture: Timestamp, due: Timestamp)?

    func wait(until t: Timestamp) {
        let now = Pacer.monotonic()
        guard let p = previous else { previous = (t, now); return }
        var gap = t - p.capture
        if gap < .zero { gap = .zero } else if gap > Pacer.longestPause { gap = Pacer.longestPause }
        let due = p.due + gap
        previous = (t, due)
        let left = (due - now).nanoseconds
        guard left > 0 else { return }
        var ts = timespec(tv_sec: Int(left / 1_000_000_000), tv_nsec: Int(left % 1_000_000_000))
        nanosleep(&ts, nil)
    }

    static func monotonic() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Timestamp(nanoseconds: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec))
    }
}

enum UUIDText {
    /// The 16-bit alias of a 128-bit Base-UUID text (with or without dashes).
    static func uuid16(of s: String) -> UInt16? {
        let hex = s.filter { $0 != "-" }
        guard hex.count == 32, hex.hasPrefix("0000"), hex.hasSuffix("00001000800000805f9b34fb") else { return nil }
        return UInt16(hex.dropFirst(4).prefix(4), radix: 16)
    }
}

/// `cuff replay`'s NDJSON on stdout: the same bytes as ``NDJSONSink`` (`SessionOutput.json`,
/// serialised, one per line), buffered in 64 KiB writes instead of one write per record (a replay
/// has no cuff waiting for a confirmation). `flushEachRecord` (for `--realtime`) delivers every line at once.
final class ReplayNDJSONSink: SampleSink, @unchecked Sendable {
    let fd: Int32
    let flushEachRecord: Bool
    let lines = NDJSONLineBuffer()

    init(fd: Int32 = 1, flushEachRecord: Bool) {
        self.fd = fd
        self.flushEachRecord = flushEachRecord
    }

    func write(_ o: SessionOutput) throws(SinkError) {
        lines.append(o)
        if flushEachRecord || lines.byteCount >= 64 * 1024 { try drain() }
    }

    func finish() throws(SinkError) { try drain() }

    func drain() throws(SinkError) {
        defer { lines.removeAll() }
        try writeAll(lines.bytes)
    }

    /// Writes NDJSON bytes as they are (after anything buffered).
    func write(serialized bytes: UnsafeRawBufferPointer) throws(SinkError) {
        if lines.byteCount > 0 { try drain() }
        try writeAll(bytes)
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer) throws(SinkError) {
        if let e = Sys.writeAll(fd, bytes).error { throw SinkError.writeFailed(destination: "stdout", errno: e.rawValue) }
    }
}
