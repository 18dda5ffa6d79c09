// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import Plot
import PlotIO
import Sinks

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

            Exit status: 0 written; 1 the input cannot be read or holds nothing to plot; 2 no session \
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
            throw ValidationError("--store \(store): store URLs (such as postgres://) are not supported yet; give an SQLite file's path")
        }
        if input != nil, since != nil || user != nil { throw ValidationError("--since and --user go with --store") }
        if store != nil, session != nil { throw ValidationError("--session goes with an INPUT, not --store") }
        if let session, session < 1 { throw ValidationError("--session counts from 1; got \(session)") }
        if let since, CivilTime.seconds(since) == nil || since.count != 10 { throw ValidationError("--since takes a date, YYYY-MM-DD; got '\(since)'") }
        do { _ = try PlotOutput.kind(of: output) } catch { throw ValidationError(error.description) }
    }

    func run() throws {
        // Say at once when a PNG cannot be made, before any work.
        if (try? PlotOutput.kind(of: output)) == .png, PlotOutput.rsvgConvert() == nil {
            fail(PlotOutputError.rsvgMissing.description, 4)
        }
        let svg: SVGElement
        var summary: String
        var skippedRows = 0
        if let store {
            let readings: [HistoryReading]
            do {
                (readings, skippedRows) = try PlotInput.readHistory(
                    store: store, since: since.flatMap(CivilTime.seconds), user: user, keyPath: key.path, warn: SinkWarnings.standardError)
            } catch {
                if case .emptyStore = error { fail(error.description, 3) }
                fail(error.description, 10)
            }
            var about = "store \(store)"
            if let user { about += " · user \(user)" }
            if let since { about += " · since \(since)" }
            svg = HistoryChart.document(readings, options: .init(guideline: guideline, subtitle: about))
            summary = "\(readings.count) reading\(readings.count == 1 ? "" : "s") against \(guideline.name)"
            if skippedRows > 0 { summary += " (\(skippedRows) unreadable row\(skippedRows == 1 ? "" : "s") skipped)" }
        } else {
            let input = input!
            let sessions: [PlotSession]
            do {
                sessions = try PlotInput.sessions(try PlotInput.read(input), format: inputFormat)
            } catch {
                fail("\(input == "-" ? "stdin" : input): \(error.description)", 1)
            }
            var chosen = Array(sessions.enumerated().map { (number: $0.offset + 1, session: $0.element) })
            if let session {
                guard session <= sessions.count else {
                    fail("\(input): there is no session \(session): the input holds \(sessions.count) session\(sessions.count == 1 ? "" : "s")", 2)
                }
                chosen = [chosen[session - 1]]
            }
            svg = SessionChart.document(chosen, source: input == "-" ? "stdin" : input)
            summary = chosen.count == 1 ? "session \(chosen[0].number) of \(sessions.count)" : "\(chosen.count) sessions"
        }
        do {
            try PlotOutput.write(SVGWriter.document(svg), to: output)
        } catch {
            switch error {
            case .rsvgMissing, .rsvgFailed: fail(error.description, 4)
            default: fail(error.description, 10)
            }
        }
        Output.log("cuff plot: \(summary) → \(output)")
        if skippedRows > 0 { Self.exit(withError: ExitCode(Output.rowsSkippedStatus)) }
    }

    private func fail(_ message: String, _ status: Int32) -> Never {
        Output.log("cuff plot: " + message)
        Self.exit(withError: ExitCode(status))
    }
}
