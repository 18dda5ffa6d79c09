// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import Foundation
import Capture
import CuffSession
import MQTTSink
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
        "With a postgres:// store or --publish: the local SQLite outbox readings are committed to before the cuff is confirmed (default: $XDG_STATE_HOME/cuff/outbox.db, with --publish $XDG_STATE_HOME/cuff/mqtt-HOST-PORT.db; beside a postgres:// store or another --publish, PATH.HOST-PORT).",
        valueName: "path"))
    var outbox: String?

    @OptionGroup var key: StoreKeyOption

    @OptionGroup var publishing: PublishOptions

    @Option(name: .customLong("fhir-subject"), help: "FHIR Observation.subject: cuff-user (default), Type/id, SYSTEM|VALUE or a display name.")
    var fhirSubject: String?

    @Flag(help: "No progress or logs on stderr.")
    var quiet = false

    func validate() throws {
        for f in formats where (try? OutputFormat(parsing: f)) == nil && CaptureFormat(rawValue: f) == nil {
            throw ValidationError("unknown --format '\(f)'; use ndjson, fhir or omh (cuff replay also takes auto, btsnoop, pcap or pcapng)")
        }
        if key.storeKeyFile != nil && store == nil { throw ValidationError("--store-key-file is the key of a --store; give --store PATH too") }
        if outbox != nil && !(store.map(SinkFactory.isServerStore) ?? false) && !publishing.isEnabled {
            throw ValidationError("--outbox is the outbox of a postgres:// --store or of --publish; give --store postgres://… or --publish mqtt://… too")
        }
    }

    var configuration: SinkConfiguration {
        var c = SinkConfiguration(
            format: (try? OutputFormat(parsing: format)) ?? .ndjson, storePath: store,
            fhirSubject: fhirSubject.map(FHIRSubject.init(parsing:)) ?? .cuffUser, storeKeyPath: store == nil ? nil : key.path)
        c.storeOpener = PostgresStoreOpener(outboxPath: outbox)
        return c
    }

    /// --quiet means nothing on stderr, sink warnings included.
    var warn: SinkWarningHandler { quiet ? SinkWarnings.ignore : SinkWarnings.standardError }

    /// The store (when `--store`) and the stdout format sink; with `--publish`, the store is a
    /// ``StoreGroup`` of the `--store` and each broker's outbox.
    func makeSinks() throws(SinkError) -> (FanOutSink, (any MeasurementStore)?) {
        var sinks = try SinkFactory.makeSinks(configuration, warn: warn)
        var store = sinks.first { $0 is any MeasurementStore } as? any MeasurementStore
        if publishing.isEnabled {
            let group: any MeasurementStore
            do { group = try withPublishers(store) } catch {
                try? store?.finish()
                throw error
            }
            if store != nil { sinks.removeFirst() }
            sinks.insert(group, at: 0)
            store = group
        }
        return (FanOutSink(sinks), store)
    }

    /// `store` with the `--publish` targets' outboxes beside it (`store` itself without `--publish`).
    func withPublishers(_ store: (any MeasurementStore)?) throws(SinkError) -> any MeasurementStore {
        let publishers: [MQTTOutboxStore]
        do {
            publishers = try publishing.openStores(outbox: outbox, sharedWithStore: store is PostgresOutboxStore, warn: warn)
        } catch let e as SinkError {
            throw e
        } catch {
            throw .storeOpen(path: "--publish", reason: "\(error)")
        }
        let all: [any MeasurementStore] = (store.map { [$0] } ?? []) + publishers
        return all.count == 1 ? all[0] : StoreGroup(all)
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
