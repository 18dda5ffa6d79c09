// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import Foundation
import Capture
import CuffSession
import PostgresStore
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

    @Option(help: ArgumentHelp(
        "Also keep every measurement, deduplicated: in this SQLite file (created with mode 0600), or on a PostgreSQL server (postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=…]) through a local outbox.",
        valueName: "path|url"))
    var store: String?

    @Option(help: ArgumentHelp(
        "With a postgres:// store: the local SQLite outbox readings are committed to before the cuff is confirmed (default: $XDG_STATE_HOME/cuff/outbox.db).",
        valueName: "path"))
    var outbox: String?

    @OptionGroup var key: StoreKeyOption

    @Option(name: .customLong("fhir-subject"), help: "FHIR Observation.subject: cuff-user (default), Type/id, SYSTEM|VALUE or a display name.")
    var fhirSubject: String?

    @Flag(help: "No progress or logs on stderr.")
    var quiet = false

    func validate() throws {
        for f in formats where (try? OutputFormat(parsing: f)) == nil && CaptureFormat(rawValue: f) == nil {
            throw ValidationError("unknown --format '\(f)'; use ndjson, fhir or omh (cuff replay also takes auto, btsnoop, pcap or pcapng)")
        }
        if key.storeKeyFile != nil && store == nil { throw ValidationError("--store-key-file is the key of a --store; give --store PATH too") }
        if outbox != nil && !(store.map(SinkFactory.isServerStore) ?? false) { throw ValidationError("--outbox is the outbox of a postgres:// --store; give --store postgres://… too") }
    }

    var configuration: SinkConfiguration {
        var c = SinkConfiguration(
            format: (try? OutputFormat(parsing: format)) ?? .ndjson, storePath: store,
            fhirSubject: fhirSubject.map(FHIRSubject.init(parsing:)) ?? .cuffUser, storeKeyPath: store == nil ? nil : key.path)
        c.storeOpener = PostgresStoreOpener(outboxPath: outbox)
        return c
    }

    /// The store (when `--store`) and the stdout format sink.
    func makeSinks() throws(SinkError) -> (FanOutSink, (any MeasurementStore)?) {
        // --quiet means nothing on stderr, sink warnings included.
        let sinks = try SinkFactory.makeSinks(configuration, warn: quiet ? SinkWarnings.ignore : SinkWarnings.standardError)
        let store = sinks.first { $0 is any MeasurementStore } as? any MeasurementStore
        return (FanOutSink(sinks), store)
    }
}

/// `--store-key-file PATH` (or `CUFF_STORE_KEY_FILE`): the key of an encrypted store.
struct StoreKeyOption: ParsableArguments {
    @Option(name: .customLong("store-key-file"), help: ArgumentHelp(
        "The store's key file (cuff key new). A new store is made encrypted with it; an encrypted store opens only with it. Default: $CUFF_STORE_KEY_FILE.",
        valueName: "path"))
    var storeKeyFile: String?

    /// The key file: the option, else the environment variable (empty counts as unset).
    var path: String? {
        if let storeKeyFile { return storeKeyFile }
        guard let v = ProcessInfo.processInfo.environment["CUFF_STORE_KEY_FILE"], !v.isEmpty else { return nil }
        return v
    }
}
