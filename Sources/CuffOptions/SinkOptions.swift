// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffCommands
import Capture
import Sinks
import Transport

extension FormatName: ExpressibleByArgument {
    public init?(argument: String) { self.init(parsing: argument) }
    public static var allValueStrings: [String] { allNames }
}

/// `--format`, `--store`, `--quiet`: where results go.
public struct SinkOptions: ParsableArguments {
    public init() {}

    /// Repeatable: `cuff replay` also takes the capture's format here (`--format pcap --format fhir`).
    @Option(
        name: .customLong("format"),
        help: ArgumentHelp(
            "Output on stdout: ndjson (default; session, progress and measurement records), fhir (R4 Observations) or omh (Open mHealth data points). cuff replay also takes the capture's format here: auto (default), btsnoop, pcap or pcapng.",
            valueName: "format"))
    public var formats: [FormatName] = []

    /// The output format (the last one given) and the capture format (only `cuff replay` takes one).
    public var format: OutputFormat { formats.output }
    public var captureFormat: CaptureFormat? { formats.capture }
    public var captureFormatName: String? { captureFormat?.rawValue }

    @Option(
        name: .customLong("store"),
        help: ArgumentHelp(
            "Also keep every measurement, deduplicated: in this SQLite file (created with mode 0600), or on a PostgreSQL server (postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=…]) through a local outbox.",
            valueName: "path|url"))
    var stores: [String] = []

    /// `--store` (taken as a list only to refuse a second one: the last silently won).
    public var store: String? { stores.last }

    @Option(
        name: .customLong("outbox"),
        help: ArgumentHelp(
            "With a postgres:// store or --publish: the local SQLite outbox readings are committed to before the cuff is confirmed (default: $XDG_STATE_HOME/cuff/outbox.db, with --publish $XDG_STATE_HOME/cuff/mqtt-HOST-PORT.db; beside a postgres:// store or another --publish, PATH.HOST-PORT).",
            valueName: "path"))
    var outboxes: [String] = []

    /// `--outbox` (a list only to refuse a second one).
    public var outbox: String? { outboxes.last }

    @OptionGroup var key: StoreKeyOption

    @OptionGroup var publishing: PublishOptions

    @Option(
        name: .customLong("fhir-subject"),
        help:
            "FHIR Observation.subject: cuff-user (default), Type/id (Patient, Group, Device or Location), SYSTEM|VALUE or a display name."
    )
    public var fhirSubject: String?

    @Flag(help: "No progress or logs on stderr.")
    public var quiet = false

    public func validate() throws {
        if stores.count > 1 {
            throw ValidationError(
                "--store is given \(stores.count) times (\(stores.joined(separator: ", "))): a command keeps one store; --publish can be given more than once"
            )
        }
        if outboxes.count > 1 {
            throw ValidationError(
                "--outbox is given \(outboxes.count) times: give one (each --publish beside another gets its own file)")
        }
        // (Probe E3: `--format fhir --format omh` printed OMH alone: the last silently won.)
        let outputs = formats.compactMap { if case let .output(f) = $0 { f } else { nil } }
        if Set(outputs.map(\.rawValue)).count > 1 {
            throw ValidationError(
                "--format names \(outputs.count) outputs (\(outputs.map(\.rawValue).joined(separator: ", "))): stdout takes one"
            )
        }
        let captures = formats.compactMap { if case let .capture(c) = $0 { c } else { nil } }
        if Set(captures.map(\.rawValue)).count > 1 {
            throw ValidationError(
                "--format names \(captures.count) capture formats (\(captures.map(\.rawValue).joined(separator: ", "))): give one"
            )
        }
        if let f = fhirSubject, let p = FHIRSubject.problem(in: f) { throw ValidationError("--fhir-subject: \(p)") }
        if key.storeKeyFile != nil && store == nil {
            throw ValidationError("--store-key-file is the key of a --store; give --store PATH too")
        }
        if outbox != nil && !(store.map(SinkFactory.isServerStore) ?? false) && !publishing.isEnabled {
            throw ValidationError(
                "--outbox is the outbox of a postgres:// --store or of --publish; give --store postgres://… or --publish mqtt://… too"
            )
        }
    }

    /// The offset the cuffs' clocks are set with, in seconds east of UTC, at the time it is
    /// called: `--cuff-timezone`'s, else the host's.
    public var cuffClock: @Sendable () -> Int64 {
        let zone = publishing.cuffTimezone
        return { PublishOptions.cuffClockOffset(zone: zone) ?? WallClock.localUTCOffsetSeconds() }
    }

    /// What the options say, for the sinks to be made from.
    public func setup() throws -> SinkSetup {
        var s = SinkSetup()
        (s.format, s.store, s.outbox, s.keyPath, s.fhirSubject, s.quiet) = (
            format, store, outbox, key.path, fhirSubject, quiet
        )
        s.publishing = try publishing.setup()
        // (Probe D3: with --cuff-timezone Europe/Berlin on a UTC host, the clocks were set in
        // Berlin time and FHIR and OMH gave those times +00:00, an hour ahead.)
        s.utcOffset = try publishing.offsetPolicy()
        return s
    }
}

/// `--store-key-file PATH` (or `CUFF_STORE_KEY_FILE`): the key of an encrypted store.
public struct StoreKeyOption: ParsableArguments {
    public init() {}

    @Option(
        name: .customLong("store-key-file"),
        help: ArgumentHelp(
            "The store's key file (cuff key new). A new store is made encrypted with it; an encrypted store opens only with it. Default: $CUFF_STORE_KEY_FILE.",
            valueName: "path"))
    public var storeKeyFile: String?

    /// The key file: the option, else the environment variable (empty counts as unset).
    public var path: String? { StoreCommands.keyPath(option: storeKeyFile) }
}
