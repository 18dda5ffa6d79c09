// SPDX-License-Identifier: GPL-2.0-or-later
import Transport

/// `--format`: what goes to stdout.
public enum OutputFormat: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Every session output as its JSON line (the default).
    case ndjson
    /// FHIR R4 Observations, one resource per line.
    case fhir
    /// Open mHealth data points, one per line.
    case omh

    /// Parses `ndjson`, `fhir`, `omh` (case-insensitive; `jsonl` is accepted for ndjson).
    public init(parsing name: String) throws(SinkError) {
        let n = name.lowercased()
        if n == "jsonl" { self = .ndjson; return }
        guard let f = OutputFormat(rawValue: n) else { throw .unknownFormat(name) }
        self = f
    }

    public var description: String { rawValue }
}

/// Everything needed to build a session's sinks.
public struct SinkConfiguration: Sendable {
    public var format: OutputFormat
    /// `--store PATH`, or nil.
    public var storePath: String?
    /// `--store-key-file PATH`: the store's key (a new store is made encrypted), or nil.
    public var storeKeyPath: String?
    /// FHIR `Observation.subject`.
    public var fhirSubject: FHIRSubject
    /// How a zone-less device time gets its offset (FHIR, OMH, and the offset recorded in the store).
    public var utcOffset: UTCOffsetPolicy
    /// Open mHealth header ids: nil for the system generator, or a seed for reproducible output.
    public var uuidSeed: UInt64?
    public var clock: WallClock
    /// With a store: print a measurement the store already held (a cuff resending its memory) again.
    public var printsStoredDuplicates: Bool
    /// Opens stores that are not SQLite files (`--store postgres://…`); nil: SQLite files only.
    public var storeOpener: (any StoreOpener)?

    public init(
        format: OutputFormat = .ndjson, storePath: String? = nil, fhirSubject: FHIRSubject = .cuffUser,
        utcOffset: UTCOffsetPolicy = .system, uuidSeed: UInt64? = nil, clock: WallClock = .system,
        printsStoredDuplicates: Bool = true, storeKeyPath: String? = nil
    ) {
        self.storeKeyPath = storeKeyPath
        self.format = format
        self.storePath = storePath
        self.fhirSubject = fhirSubject
        self.utcOffset = utcOffset
        self.uuidSeed = uuidSeed
        self.clock = clock
        self.printsStoredDuplicates = printsStoredDuplicates
    }
}

public enum SinkFactory {
    /// Whether `location` is a server's URL (`postgres://`, `postgresql://`) rather than a file's path.
    public static func isServerStore(_ location: String) -> Bool {
        let l = location.lowercased()
        return l.hasPrefix("postgres://") || l.hasPrefix("postgresql://")
    }

    /// The store at `location`: a server's URL through the configuration's ``StoreOpener``, else the
    /// SQLite file, with the configuration's key (read from its file) when there is one.
    public static func openStore(
        _ location: String, _ options: SinkConfiguration, mustExist: Bool = false,
        warn: @escaping SinkWarningHandler = SinkWarnings.standardError
    ) throws(SinkError) -> any MeasurementStore {
        if let opener = options.storeOpener, opener.handles(location) {
            return try opener.open(location, options, purpose: mustExist ? .read : .write, warn: warn)
        }
        if isServerStore(location) {
            throw .storeOpen(path: location, reason: "this cuff was built without the PostgreSQL store")
        }
        return try openSQLiteStore(location, options, mustExist: mustExist, warn: warn)
    }

    /// The SQLite store at `path`, with the configuration's key (read from its file) when there is one;
    /// read-only when it `mustExist` (it is opened to be read).
    public static func openSQLiteStore(
        _ path: String, _ options: SinkConfiguration, mustExist: Bool = false,
        warn: @escaping SinkWarningHandler = SinkWarnings.standardError
    ) throws(SinkError) -> SQLiteStore {
        let key = try options.storeKeyPath.map { p throws(SinkError) in try StoreKey.load(path: p) }
        return try SQLiteStore(
            path: path, mustExist: mustExist, readOnly: mustExist, key: key, utcOffset: options.utcOffset, warn: warn)
    }

    /// The sink for `format` writing to `output`.
    public static func formatSink(
        _ options: SinkConfiguration, output: any LineOutput,
        warn: @escaping SinkWarningHandler = SinkWarnings.standardError
    ) -> any SampleSink & Sendable {
        switch options.format {
        case .ndjson: return NDJSONSink(output: output)
        case .fhir: return FHIRSink(output: output, subject: options.fhirSubject, utcOffset: options.utcOffset)
        case .omh:
            return OMHSink(
                output: output, ids: options.uuidSeed.map(UUIDGenerator.seeded) ?? .system(), clock: options.clock,
                utcOffset: options.utcOffset, warn: warn)
        }
    }

    /// A session's sinks: the store first (when `storePath` is set), then the format on `output`
    /// (stdout by default). Write to them with ``FanOutSink``, which stops at the first failure, so a
    /// measurement the store could not keep is not printed either.
    public static func makeSinks(
        _ options: SinkConfiguration, output: any LineOutput = FileDescriptorOutput.standardOutput(),
        warn: @escaping SinkWarningHandler = SinkWarnings.standardError
    ) throws(SinkError) -> [any SampleSink & Sendable] {
        var sinks: [any SampleSink & Sendable] = []
        if let p = options.storePath { sinks.append(try openStore(p, options, warn: warn)) }
        sinks.append(formatSink(options, output: output, warn: warn))
        return sinks
    }

    /// ``makeSinks(_:output:warn:)`` behind one ``FanOutSink``.
    public static func makeSink(
        _ options: SinkConfiguration, output: any LineOutput = FileDescriptorOutput.standardOutput(),
        warn: @escaping SinkWarningHandler = SinkWarnings.standardError
    ) throws(SinkError) -> FanOutSink {
        FanOutSink(
            try makeSinks(options, output: output, warn: warn), skipsStoredDuplicates: !options.printsStoredDuplicates)
    }

    /// `cuff history --store PATH --format F`: every stored measurement, decoded again from its raw
    /// bytes, written through the format's sink, with the host offsets recorded at ingest. The store
    /// must exist (a missing one is an error, not an empty history) and is opened read-only. A row
    /// that cannot be read is skipped and named on `warn` (row id, never a value); the rest is
    /// printed. Finishes the sink.
    @discardableResult
    public static func printHistory(
        storePath: String, options: SinkConfiguration, output: any LineOutput = FileDescriptorOutput.standardOutput(),
        warn: @escaping SinkWarningHandler = SinkWarnings.standardError
    ) throws(SinkError) -> HistoryReport {
        let store = try openStore(storePath, options, mustExist: true, warn: warn)
        let read = try store.readRecords()
        read.warn(warn, store: store.storeName)
        var o = options
        o.utcOffset = .recorded(
            Dictionary(
                read.entries.map { ($0.stored.dedupKey, $0.stored.hostUTCOffsetSeconds) },
                uniquingKeysWith: { a, _ in a }),
            fallback: options.utcOffset)
        let sink = formatSink(o, output: output, warn: warn)
        for e in read.entries { try sink.write(.measurement(e.record)) }
        try sink.finish()
        try store.finish()
        return HistoryReport(printed: read.entries.count, skipped: read.skipped.count)
    }
}

/// What ``SinkFactory/printHistory(storePath:options:output:warn:)`` printed.
public struct HistoryReport: Sendable, Hashable {
    /// Measurements printed.
    public var printed: Int
    /// Rows that could not be read and were skipped.
    public var skipped: Int
}
