// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffOptions
import CuffCommands
import Plot
import PlotIO

/// `cuff plot`: a session's cuff-pressure curve, or a store's history, as SVG (or PNG).
struct PlotCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plot",
        abstract: "Draw sessions (from NDJSON or a capture) or a store's history as SVG or PNG.",
        discussion: """
            cuff plot INPUT --output FILE.svg draws each session in INPUT: cuff's NDJSON (the records \
            measure and replay print; - reads stdin) or a capture file (btsnoop, pcap, pcapng; replayed in process). \
            The format comes from the file's magic, or --input-format. One panel per session, or \
            --session N for the Nth.

            cuff plot --store PATH --output FILE.svg draws the store's readings over time against the \
            blood-pressure categories of --guideline (esc-esh-2018, the default, or acc-aha-2017), with \
            the mean of each ISO week. --since YYYY-MM-DD and --user N select readings.

            An output ending in .png is rendered by rsvg-convert (package librsvg2-bin).

            Exit status: 0 written; 1 the input cannot be read or holds nothing to plot (or a capture \
            is damaged: what came before the fault is drawn, the error names its offset); 2 no session \
            --session N; 3 no reading in the store (or none matches --since/--user); 4 rsvg-convert \
            is missing or failed; 10 the store cannot be read or the output cannot be written; 11 \
            written, but rows of the store could not be read (each skipped with a warning naming its \
            row id); 64 a usage error.
            """
    )

    @Argument(help: "NDJSON records or a capture file; - for stdin.")
    var input: String?

    @Option(name: [.short, .long], help: "The file to write: FILE.svg, or FILE.png (needs rsvg-convert).")
    var output: String

    @Option(help: "Only the Nth session of the input (1 = the first).")
    var session: Int?

    @Option(name: .customLong("input-format"), help: "The input's format (auto: from the file's first bytes).")
    var inputFormat: PlotInputFormat = .auto

    @Option(help: "Plot the history of this SQLite store (written by --store) instead of an input.")
    var store: String?

    @OptionGroup var key: StoreKeyOption

    @Option(help: "With --store: readings from this day on (YYYY-MM-DD, the cuff's clock).")
    var since: String?

    @Option(help: "With --store: readings of this user ID only.")
    var user: Int?

    @Option(help: "With --store: the blood-pressure categories drawn.")
    var guideline: Guideline = .default

    func validate() throws {
        switch (input, store) {
        case (nil, nil): throw ValidationError("give an INPUT (NDJSON or a capture, - for stdin) or --store PATH")
        case (.some, .some): throw ValidationError("give an INPUT or --store, not both")
        default: break
        }
        if let store, store.contains("://") {
            throw ValidationError(
                "--store \(store): store URLs (such as postgres://) are not supported yet; give an SQLite file's path")
        }
        if input != nil, since != nil || user != nil { throw ValidationError("--since and --user go with --store") }
        if store != nil, session != nil { throw ValidationError("--session goes with an INPUT, not --store") }
        if let session, session < 1 { throw ValidationError("--session counts from 1; got \(session)") }
        // A date that exists (2026-02-30 would be taken as March 2): it reads back the same.
        if let since,
            since.count != 10 || CivilTime.seconds(since).map({ CivilTime.dateText(days: CivilTime.day($0)) }) != since
        {
            throw ValidationError("--since takes a date, YYYY-MM-DD; got '\(since)'")
        }
        do { _ = try PlotOutput.kind(of: output) } catch { throw ValidationError(error.description) }
    }

    func run() throws {
        let source: PlotService.Source =
            if let store {
                .store(store, since: since, user: user, keyPath: key.path, guideline: guideline)
            } else {
                .input(input!, format: inputFormat, session: session)
            }
        try PlotService(source: source, output: output).run()
    }
}
