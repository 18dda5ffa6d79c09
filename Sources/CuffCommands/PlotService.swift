// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import Plot
import PlotIO
import Sinks

/// `cuff plot`: sessions (from NDJSON or a capture) or a store's history drawn as SVG (or PNG)
/// into ``output``; says what it drew on stderr. Failures throw the README's statuses.
public struct PlotService {
    /// What is drawn.
    public enum Source {
        /// An input (`-`: stdin) in `format`; `session`: only the Nth.
        case input(String, format: PlotInputFormat, session: Int?)
        /// A store's readings (`since`: YYYY-MM-DD; `user`: one user's), against `guideline`.
        case store(String, since: String?, user: Int?, keyPath: String?, guideline: Guideline)
    }

    public var source: Source
    /// FILE.svg, or FILE.png (rendered by rsvg-convert).
    public var output: String

    public init(source: Source, output: String) {
        self.source = source
        self.output = output
    }

    static func fail(_ message: String, _ status: ExitStatus) -> ExitStatus {
        Console.log("cuff plot: " + message)
        return status
    }

    public func run() throws(ExitStatus) {
        // Say at once when a PNG cannot be made, before any work.
        if (try? PlotOutput.kind(of: output)) == .png, PlotOutput.rsvgConvert() == nil {
            throw Self.fail(PlotOutputError.rsvgMissing.description, .converterFailed)
        }
        let svg: SVGElement
        var summary: String
        var skippedRows = 0
        /// A capture damaged after its first records: what came before the fault is drawn.
        var damage: String?
        switch source {
        case let .store(store, since, user, keyPath, guideline):
            let readings: [HistoryReading]
            do {
                (readings, skippedRows) = try PlotInput.readHistory(
                    store: store, since: since.flatMap(CivilTime.seconds), user: user, keyPath: keyPath,
                    warn: SinkWarnings.standardError)
            } catch {
                if case .emptyStore = error { throw Self.fail(error.description, .nothingToPlot) }
                throw Self.fail(error.description, .sinkFailed)
            }
            var about = "store \(store)"
            if let user { about += " · user \(user)" }
            if let since { about += " · since \(since)" }
            svg = HistoryChart.document(readings, options: .init(guideline: guideline, subtitle: about))
            summary = "\(readings.count) reading\(readings.count == 1 ? "" : "s") against \(guideline.name)"
            if skippedRows > 0 { summary += " (\(skippedRows) unreadable row\(skippedRows == 1 ? "" : "s") skipped)" }
        case let .input(input, format, session):
            let sessions: [PlotSession]
            do {
                (sessions, damage) = try PlotInput.sessions(path: input, format: format, keep: session)
            } catch {
                throw Self.fail("\(input == "-" ? "stdin" : input): \(error.description)", .failure)
            }
            var chosen: [(number: Int, session: PlotSession)]
            if let session {
                guard session <= sessions.count else {
                    throw Self.fail(
                        "\(input): there is no session \(session): the input holds \(sessions.count) session\(sessions.count == 1 ? "" : "s")"
                            + (damage.map { " (the capture is damaged: \($0))" } ?? ""),
                        .noSuchSession)
                }
                chosen = [(session, sessions[session - 1])]
            } else {
                chosen = sessions.enumerated().map { (number: $0.offset + 1, session: $0.element) }
            }
            svg = SessionChart.document(chosen, source: input == "-" ? "stdin" : input)
            summary =
                chosen.count == 1 ? "session \(chosen[0].number) of \(sessions.count)" : "\(chosen.count) sessions"
        }
        do {
            try PlotOutput.write(SVGWriter.document(svg), to: output)
        } catch {
            switch error {
            case .rsvgMissing, .rsvgFailed: throw Self.fail(error.description, .converterFailed)
            default: throw Self.fail(error.description, .sinkFailed)
            }
        }
        Console.log("cuff plot: \(summary) → \(output)")
        if let damage, case let .input(input, _, _) = source {
            let inputName = input == "-" ? "stdin" : input
            // (Probe C3: a damaged capture was drawn as far as it went, with nothing said and exit 0.)
            throw Self.fail(
                "\(inputName): the capture is damaged: \(damage); what came before the fault is drawn", .failure)
        }
        if skippedRows > 0 { throw .rowsSkipped }
    }
}
