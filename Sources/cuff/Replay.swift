// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffOptions
import BloodPressure
import CuffCommands
import Capture
import ReplayEngine
import Sinks

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

    @Argument(help: "The capture file (`-`: stdin, a pipe or a file).")
    var file: String

    @Option(
        name: [.customLong("input-format"), .customLong("capture-format", withSingleDash: false)],
        help:
            "The capture's format (default auto: from the file's first bytes; --format btsnoop|pcap|pcapng does the same)."
    )
    var inputFormat: CaptureFormat?

    /// `--input-format` (or `--capture-format`, or a capture format given to `--format`); default: from the magic.
    var captureFormat: CaptureFormat { inputFormat ?? sinks.captureFormat ?? .auto }

    @Option(
        name: .customLong("handle"),
        help: ArgumentHelp(
            "Map a value handle to a characteristic: HANDLE=UUID, e.g. 0x0012=2a35 (repeatable).", valueName: "H=UUID"),
        transform: Replay.parseHandle)
    var handles: [HandleMapping] = []

    @Option(help: "Only this controller (hciN index, as in the capture).")
    var adapter: UInt16?

    @Flag(
        help:
            "Pace the replay by the capture's timestamps instead of going as fast as possible (pauses over 5 s are shortened to 5 s)."
    )
    var realtime = false

    @Option(help: "Apply this quirk profile (default: chosen from each device's name and model).")
    var quirk: QuirkProfile?

    @OptionGroup var sinks: SinkOptions

    @OptionGroup var cuffProtocol: ProtocolOption

    @Option(
        help:
            "Threads that replay a btsnoop file, stretch by stretch (1: one thread; default: one per CPU, at most 4; one on a single CPU). The output is the same."
    )
    var jobs: Int?

    @Option(
        name: .customLong("segment-bytes"),
        help: ArgumentHelp(
            "Smallest stretch handed to a replay thread, in bytes (default: from the file's size, 262144 to 1048576).",
            visibility: .hidden))
    var segmentBytes: Int?

    /// `--handle`'s transform (also `cuff simulate --from-capture`'s).
    static func parseHandle(_ s: String) throws -> HandleMapping {
        try usage { try HandleMapping(parsing: s) }
    }

    func validate() throws {
        if let jobs, !(1...64).contains(jobs) {
            throw ValidationError("--jobs takes a number of threads from 1 to 64; got \(jobs)")
        }
        if let segmentBytes, !(1...ReplayJob.largestSegmentBytes).contains(segmentBytes) {
            throw ValidationError(
                "--segment-bytes takes 1 to \(ReplayJob.largestSegmentBytes) bytes; got \(segmentBytes)")
        }
    }

    func run() throws {
        let setup = try sinks.setup()
        // (`-` as the other tools take it: /dev/stdin reopens a file that stdin is, which the
        // parallel replay reads from offsets; a pipe is read once.)
        var job = ReplayJob(path: file == "-" ? "/dev/stdin" : file)
        job.format = captureFormat
        job.adapter = adapter
        job.overrides = HandleMapping.overrides(handles)
        job.realtime = realtime
        job.configuration.forcedProtocol = cuffProtocol.forced
        job.configuration.quirk = quirk
        if let jobs {
            job.threads = jobs
            job.parallelMinimumBytes = 0  // the threads asked for, whatever the file's size
        }
        if let segmentBytes { job.segmentBytes = segmentBytes }
        job.showAll = !setup.quiet
        try ReplayService.run(job, quiet: setup.quiet) { () throws(SinkError) in
            try setup.replaySinks(realtime: realtime)
        }
    }
}
