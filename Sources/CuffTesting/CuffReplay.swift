// SPDX-License-Identifier: GPL-2.0-or-later

/// One record a replayed session gave: the typed value and the NDJSON line `cuff replay` prints
/// for it.
public struct CuffRecord: Sendable, Hashable {
    /// The session, progress or measurement record.
    public var output: SessionOutput
    /// Its NDJSON line (without the newline): the bytes `cuff replay` prints for it.
    public var ndjson: String

    /// Wraps a record and serialises it as `cuff replay` does.
    ///
    /// - Parameter output: a record a session gave.
    public init(_ output: SessionOutput) {
        self.output = output
        ndjson = output.json.serialized()
    }

    /// The measurement, when the record is one.
    public var measurement: MeasurementRecord? {
        if case let .measurement(m) = output { return m }
        return nil
    }
}

/// What a capture replayed to: the records, and what `cuff replay` says about it on stderr.
public struct ReplayedCapture: Sendable {
    /// Every record, in the order `cuff replay` prints them.
    public var records: [CuffRecord] = []
    /// Connections where a controller in the capture was the central.
    public var sessions = 0
    /// Connections whose values came on handles nothing mapped (`cuff replay` exits 7 and names
    /// them; map them with ``CuffReplay/Options/handles``).
    public var unmapped: [CaptureReplay.Unmapped] = []
    /// Damage the replay went past (a skipped fragment or frame).
    public var warnings: [CaptureError] = []
    /// Notes that are no fault (a connection that used an earlier connection's handles).
    public var notices: [String] = []
    /// The sessions' log lines (what `cuff replay` shows without `--quiet`).
    public var log: [String] = []
    /// The damage that ended the capture early, if any (the records before it are kept, as
    /// `cuff replay` prints them before it exits 1).
    public var fault: CaptureError?

    /// The measurement records, in order.
    public var measurements: [MeasurementRecord] { records.compactMap(\.measurement) }

    /// The NDJSON lines, one per record (what `cuff replay FILE --quiet` prints, without newlines).
    public var ndjsonLines: [String] { records.map(\.ndjson) }
}

/// Replays a capture of a cuff session into the records a live session gave, as `cuff replay`
/// does.
///
/// ```swift
/// let replayed = try CuffReplay.replay(path: "captures/normal.btsnoop")
/// #expect(replayed.measurements.first?.systolic.doubleValue == 120)
/// ```
///
/// The capture's format (btsnoop, pcap, pcapng) comes from its first bytes unless given. Every
/// connection where a controller in the capture is the central is followed; the records carry
/// the capture's timestamps as `received_at`.
public enum CuffReplay {
    /// What to replay of a capture and how (`cuff replay`'s options).
    public struct Options: Sendable {
        /// The capture's format; `.auto` (the default) reads it from the first bytes.
        public var format: CaptureFormat = .auto
        /// Only this controller (the hciN index in the capture); nil for all (`--adapter`).
        public var adapter: UInt16?
        /// Value handles mapped to characteristics by hand, for a capture without service
        /// discovery (`--handle 0x0012=2a35`); they win over discovered handles.
        public var handles: [UInt16: CuffCharacteristic] = [:]
        /// The cuff protocol to follow instead of the one chosen from what the device offers
        /// (`--protocol`).
        public var cuffProtocol: CuffProtocolID?

        /// Options as `cuff replay FILE` has them with no flags.
        ///
        /// - Parameters:
        ///   - format: the capture's format (`.auto`: from its first bytes).
        ///   - adapter: only this controller, or nil for all.
        ///   - handles: value handles mapped by hand.
        ///   - cuffProtocol: the protocol to follow, or nil to choose it from the device.
        public init(
            format: CaptureFormat = .auto, adapter: UInt16? = nil, handles: [UInt16: CuffCharacteristic] = [:],
            cuffProtocol: CuffProtocolID? = nil
        ) {
            self.format = format
            self.adapter = adapter
            self.handles = handles
            self.cuffProtocol = cuffProtocol
        }
    }

    /// Replays the capture file at `path`.
    ///
    /// - Parameters:
    ///   - path: a btsnoop, pcap or pcapng file.
    ///   - options: format, controller, handle map and protocol (default: as `cuff replay FILE`).
    /// - Returns: the records and what the replay noted; damage after the header ends the
    ///   replay with ``ReplayedCapture/fault`` set and the records before it kept.
    /// - Throws: `CaptureError` when the file cannot be opened or does not begin as a capture
    ///   (match its `code`).
    public static func replay(path: String, options: Options = Options()) throws(CaptureError) -> ReplayedCapture {
        var reader = try CaptureReader(path: path, format: options.format)
        try reader.readHeader()
        var replay = makeReplay(options)
        var out: [ReplayOutput] = []
        let ending = replay.replay(&reader, into: &out, batch: .max, deliver: { _ in true })
        return finish(&replay, ending, &out)
    }

    /// Replays a capture held in memory.
    ///
    /// - Parameters:
    ///   - bytes: a whole btsnoop, pcap or pcapng file's bytes.
    ///   - options: format, controller, handle map and protocol (default: as `cuff replay FILE`).
    /// - Returns: the records and what the replay noted, as ``replay(path:options:)``.
    /// - Throws: `CaptureError` when the bytes do not begin as a capture.
    public static func replay(bytes: [UInt8], options: Options = Options()) throws(CaptureError) -> ReplayedCapture {
        var reader = CaptureReader(source: ArrayByteSource(bytes), format: options.format)
        try reader.readHeader()
        var replay = makeReplay(options)
        var out: [ReplayOutput] = []
        let ending = replay.replay(&reader, into: &out, batch: .max, deliver: { _ in true })
        return finish(&replay, ending, &out)
    }

    /// The replay `cuff replay` runs: its session configuration, with the options.
    static func makeReplay(_ options: Options) -> CaptureReplay {
        var configuration = CuffSessionConfiguration(address: "")
        configuration.timeout = .seconds(300)
        configuration.forcedProtocol = options.cuffProtocol
        return CaptureReplay(configuration: configuration, adapter: options.adapter, overrides: options.handles)
    }

    /// Ends the sessions still open and sorts the outputs.
    static func finish(
        _ replay: inout CaptureReplay, _ ending: CaptureReplay.Ending,
        _ out: inout [ReplayOutput]
    ) -> ReplayedCapture {
        var result = ReplayedCapture()
        if case let .fault(e) = ending { result.fault = e }
        replay.finish(after: result.fault, into: &out)
        for o in out {
            switch o {
            case let .emit(e): result.records.append(CuffRecord(e))
            case let .log(s): result.log.append(s)
            case let .notice(s): result.notices.append(s)
            case let .warning(w): result.warnings.append(w)
            }
        }
        result.sessions = replay.sessions
        result.unmapped = replay.unmapped
        return result
    }
}
