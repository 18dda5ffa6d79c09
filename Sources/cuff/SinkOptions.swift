// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import Capture
import CuffSession
import Sinks

/// `--format`, `--store`, `--quiet`: where results go.
struct SinkOptions: ParsableArguments {
    /// Repeatable: `cuff replay` also takes the capture's format here (`--format pcap --format fhir`);
    /// the two sets of names do not overlap.
    @Option(name: .customLong("format"), help: ArgumentHelp(
        "Output on stdout: ndjson (default; session, progress and measurement records), fhir (R4 Observations) or omh (Open mHealth data points). cuff replay also takes the capture's format here: auto (default), btsnoop, pcap or pcapng.",
        valueName: "format"))
    var formats: [String] = []

    /// The output format's name (the last one given).
    var format: String { formats.last { (try? OutputFormat(parsing: $0)) != nil } ?? "ndjson" }

    /// The capture format named with `--format`, if any (only `cuff replay` accepts one).
    var captureFormatName: String? { formats.last { CaptureFormat(rawValue: $0) != nil } }

    @Option(help: "Also keep every measurement in this SQLite file (created with mode 0600), deduplicated.")
    var store: String?

    @Option(name: .customLong("fhir-subject"), help: "FHIR Observation.subject: cuff-user (default), Type/id, SYSTEM|VALUE or a display name.")
    var fhirSubject: String?

    @Flag(help: "No progress or logs on stderr.")
    var quiet = false

    func validate() throws {
        for f in formats where (try? OutputFormat(parsing: f)) == nil && CaptureFormat(rawValue: f) == nil {
            throw ValidationError("unknown --format '\(f)'; use ndjson, fhir or omh (cuff replay also takes auto, btsnoop, pcap or pcapng)")
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
