// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import BloodPressure
import Capture
import CuffCore
import CuffSession
import ReplayEngine
import Sinks
import Transport
#if canImport(Glibc)
import Glibc
#endif

struct Replay: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Replay a capture (btsnoop, pcap, pcapng) of a cuff session: print the records a live session gave.",
        discussion: """
            Reads btsnoop (1001, 1002, 2001 = btmon -w), pcap and pcapng (link types 201, 254, 256); \
            the format comes from the file's magic, or --input-format btsnoop|pcap|pcapng forces it \
            (--format pcap does the same, and --format also picks the output: --format pcap --format fhir). It follows every connection where a controller in the capture is the central, and prints the \
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

    @Option(name: [.customLong("input-format"), .customLong("capture-format", withSingleDash: false)],
            help: "The capture's format (default auto: from the file's first bytes; --format btsnoop|pcap|pcapng does the same).")
    var inputFormat: CaptureFormat?

    /// `--input-format` (or `--capture-format`, or a capture format given to `--format`); default: from the magic.
    var captureFormat: CaptureFormat {
        inputFormat ?? sinks.captureFormatName.flatMap(CaptureFormat.init(rawValue:)) ?? .auto
    }

    @Option(name: .customLong("handle"), help: ArgumentHelp("Map a value handle to a characteristic: HANDLE=UUID, e.g. 0x0012=2a35 (repeatable).", valueName: "H=UUID"),
            transform: Replay.parseHandle)
    var handles: [HandleMapping] = []

    @Option(help: "Only this controller (hciN index, as in the capture).")
    var adapter: UInt16?

    @Flag(help: "Pace the replay by the capture's timestamps instead of going as fast as possible (pauses over 5 s are shortened to 5 s).")
    var realtime = false

    @Option(help: "Apply this quirk profile (default: chosen from each device's name and model).")
    var quirk: QuirkProfile?

    @OptionGroup var sinks: SinkOptions

    @OptionGroup var cuffProtocol: ProtocolOption

    @Option(help: "Threads that replay a btsnoop file, stretch by stretch (1: one thread; default: one per CPU, at most 4, and one on 2 CPUs or fewer). The output is the same.")
    var jobs: Int?

    @Option(name: .customLong("segment-bytes"), help: ArgumentHelp("Smallest stretch handed to a replay thread, in bytes (default 262144).", visibility: .hidden))
    var segmentBytes: Int?

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
            let known = CuffCharacteristic.allCases.compactMap { $0.uuid16.map { Hex.digits($0, 4, uppercase: false) } }
            throw ValidationError("--handle: '\(parts[1])' is not a characteristic cuff knows (\(known.joined(separator: " ")))")
        }
        return HandleMapping(handle: handle, characteristic: c)
    }

    func validate() throws {
        if let jobs, !(1...64).contains(jobs) { throw ValidationError("--jobs takes a number of threads from 1 to 64; got \(jobs)") }
        if let segmentBytes, segmentBytes < 1 { throw ValidationError("--segment-bytes takes a positive number of bytes; got \(segmentBytes)") }
    }

    func run() throws {
        let display = ProgressDisplay(quiet: sinks.quiet)
        let sinks: ReplaySinks
        do {
            // The store first (a record it cannot keep is not printed), then stdout; NDJSON through
            // the replay's own buffered writer (same bytes as NDJSONSink, fewer syscalls).
            var list: [any SampleSink & Sendable] = []
            let store = try self.sinks.store.map { p throws(SinkError) in try SinkFactory.openStore(p, self.sinks.configuration) }
            if let s = self.sinks.publishing.isEnabled ? try self.sinks.withPublishers(store) : store { list.append(s) }
            list.append(self.sinks.format == "ndjson"
                ? ReplayNDJSONSink(flushEachRecord: realtime || list.count > 0)
                : SinkFactory.formatSink(self.sinks.configuration, output: FileDescriptorOutput.standardOutput(),
                                         warn: self.sinks.quiet ? SinkWarnings.ignore : SinkWarnings.standardError))
            sinks = ReplaySinks(fan: FanOutSink(list), direct: list.count == 1 ? list[0] as? ReplayNDJSONSink : nil)
        } catch {
            throw ExitCode(Output.sinkFailed("cuff replay", error))
        }
        var job = ReplayJob(path: file)
        job.format = captureFormat
        job.adapter = adapter
        for m in handles { job.overrides[m.handle] = m.characteristic }
        job.realtime = realtime
        job.configuration.forcedProtocol = cuffProtocol.forced
        job.configuration.quirk = quirk
        if let jobs {
            job.threads = jobs
            job.parallelMinimumBytes = 0  // the threads asked for, whatever the file's size
        }
        if let segmentBytes { job.segmentBytes = segmentBytes }
        job.showAll = !self.sinks.quiet
        let result: ReplayResult
        do {
            result = try job.run(into: sinks, presenter: ReplayDisplay(display: display, file: file))
        } catch {
            Output.log("cuff replay: \(error.message)")
            throw ExitCode(1)
        }
        let (sessions, measurements, unmapped, fault) = (result.sessions, result.measurements, result.unmapped, result.fault)
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
                return "\(Hex.handle(h)) (\(kinds.joined(separator: ", ")))"
            }
            let conns = g.connections == 1 ? "connection \(Hex.handle(g.first.connectionHandle))" : "\(g.connections) connections"
            Output.log("cuff replay: hci\(g.first.adapter) \(conns) to \(g.first.address): no service discovery in the capture, so these value handles are unknown: \(list.joined(separator: ", ")).")
            let example = g.totals.keys.sorted().map { h -> String in
                "--handle \(Hex.handle(h))=\(g.totals[h]!.indications > 0 ? "2a35" : "2a36")"
            }.joined(separator: " ")
            Output.log("cuff replay: map them with --handle HANDLE=UUID (indications usually carry the Blood Pressure Measurement 2a35, or 2b34 enhanced; notifications the Intermediate Cuff Pressure 2a36, or 2b35), e.g. cuff replay \(file) \(example)")
        }
        if let fault {
            Output.log("cuff replay: \(file): \(Replay.describe(fault))")
        }
        if !self.sinks.quiet {
            Output.log("cuff replay: \(sessions) session\(sessions == 1 ? "" : "s"), \(measurements) measurement\(measurements == 1 ? "" : "s")")
        }
        if result.sinkFailed { throw ExitCode(Output.sinkFailureStatus) }
        if fault != nil || result.warnings > 0 { throw ExitCode(1) }
        if !unmapped.isEmpty { throw ExitCode(7) }
        if measurements == 0 { throw ExitCode(2) }
    }

    static func describe(_ e: CaptureError) -> String {
        var s = "\(e.code.rawValue)"
        if let o = e.offset { s += " at offset \(o)" }
        if !e.message.isEmpty { s += ": " + e.message }
        return s
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


/// `cuff replay`'s stderr: records on the progress display, log lines, notices and warnings.
final class ReplayDisplay: ReplayPresenter, @unchecked Sendable {
    let display: ProgressDisplay
    let file: String

    init(display: ProgressDisplay, file: String) {
        self.display = display
        self.file = file
    }

    func show(_ o: CaptureReplay.Output) {
        switch o {
        case let .emit(e): display.show(e)
        case let .log(s): display.log(s)
        case let .notice(s):
            display.clearGauge()
            Output.log("cuff replay: \(s)")
        case let .warning(w):
            Output.log("cuff replay: \(file): \(Replay.describe(w))")
        }
    }

    func sinkFailed(_ error: SinkError) { _ = Output.sinkFailed("cuff replay", error) }
}
