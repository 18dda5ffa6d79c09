// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffSession
import Sinks

/// `--format`, `--store`, `--quiet`: where results go.
struct SinkOptions: ParsableArguments {
    @Option(help: "Output on stdout: ndjson (default; session, progress and measurement records), fhir (R4 Observations) or omh (Open mHealth data points).")
    var format: String = "ndjson"

    @Option(help: "Also keep every measurement in this SQLite file (created with mode 0600), deduplicated.")
    var store: String?

    @Option(name: .customLong("fhir-subject"), help: "FHIR Observation.subject: cuff-user (default), Type/id, SYSTEM|VALUE or a display name.")
    var fhirSubject: String?

    @Flag(help: "No progress or logs on stderr.")
    var quiet = false

    func validate() throws {
        do { _ = try OutputFormat(parsing: format) } catch {
            throw ValidationError("unknown --format '\(format)'; use ndjson, fhir or omh")
        }
    }

    var configuration: SinkConfiguration {
        SinkConfiguration(
            format: (try? OutputFormat(parsing: format)) ?? .ndjson, storePath: store,
            fhirSubject: fhirSubject.map(FHIRSubject.init(parsing:)) ?? .cuffUser)
    }

    /// The store (when `--store`) and the stdout format sink.
    func makeSinks() throws(SinkError) -> (FanOutSink, SQLiteStore?) {
        // --quiet means nothing on stderr, sink warnings included.
        let sinks = try SinkFactory.makeSinks(configuration, warn: quiet ? SinkWarnings.ignore : SinkWarnings.standardError)
        let store = sinks.first { $0 is SQLiteStore } as? SQLiteStore
        return (FanOutSink(sinks), store)
    }
}
