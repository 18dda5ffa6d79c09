// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import Capture
import CuffCore
import CuffSession
import Foundation
import Plot
import Sinks
import StoreFormat

/// Why an input cannot be plotted.
public enum PlotInputError: Error, Equatable, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case badLine(line: Int, reason: String)
    case capture(String)
    case noSessions
    case storeURL(String)
    case store(String)
    case emptyStore(path: String, filtered: Bool)

    public var description: String {
        switch self {
        case let .unreadable(path, reason): "cannot read \(path): \(reason)"
        case let .badLine(line, reason): "line \(line): \(reason)"
        case let .capture(s): s
        case .noSessions: "the input holds no session, progress or measurement record: nothing to plot"
        case let .storeURL(u): "\(u): store URLs are not supported yet (only an SQLite file: --store PATH)"
        case let .store(s): s
        case let .emptyStore(path, filtered):
            filtered ? "\(path): no reading matches --since/--user" : "\(path): the store holds no reading"
        }
    }
}

/// What an input file is.
public enum PlotInputFormat: String, Sendable, CaseIterable {
    case auto, ndjson, btsnoop, pcap, pcapng
}

/// Turns cuff's records (NDJSON text, a capture replayed in process, a store) into the plain
/// values the ``Plot`` charts draw.
public enum PlotInput {
    // MARK: Reading

    /// The capture format from the file's first bytes (``CaptureFormat/detect(_:)``), or nil: NDJSON text.
    public static func sniff(_ bytes: [UInt8]) -> CaptureFormat? { CaptureFormat.detect(bytes[...]) }

    /// The sessions in `bytes`: NDJSON as cuff prints it, or a capture replayed as `cuff replay`
    /// would (its records then go through the same NDJSON reading). A capture damaged after its
    /// first records gives what came before the fault (``sessions(path:format:keep:)`` says it).
    public static func sessions(_ bytes: [UInt8], format: PlotInputFormat = .auto) throws(PlotInputError)
        -> [PlotSession]
    {
        var grouping = SessionGrouping(keep: nil)
        if let capture = captureFormat(format, head: bytes.prefix(8)) {
            _ = try replay(bytes, format: capture, into: &grouping)
        } else {
            try lines(ArrayByteSource(bytes)) { (line, n) throws(PlotInputError) in
                try grouping.take(line: line, number: n)
            }
        }
        return try grouping.finish()
    }

    /// What a plot of a file (or stdin, `-`) draws from, read as it streams: its sessions, and the
    /// damage a capture showed after its first records (nil when none: what came before is
    /// drawn). With `keep`, only the `keep`th session keeps its samples and results (the others
    /// are counted, their data dropped as it comes), so memory follows that session, not the file
    /// (probe C3: a 150 MB capture took 964 MB for `--session 1`). A capture on stdin is read
    /// whole first (the reader wants a file or bytes); NDJSON on stdin streams.
    public static func sessions(path: String, format: PlotInputFormat = .auto, keep: Int? = nil)
        throws(PlotInputError) -> (sessions: [PlotSession], fault: String?)
    {
        func open() throws(PlotInputError) -> FileByteSource {
            do {
                return try FileByteSource(path: path == "-" ? "/dev/stdin" : path)
            } catch {
                throw .unreadable(path: path, reason: error.errno == ENOENT ? "no such file" : error.message)
            }
        }
        var source = try open()
        // The first bytes say what it is.
        var head: [UInt8] = []
        do {
            while head.count < 8, try source.read(into: &head, maxCount: 8 - head.count) > 0 {}
        } catch {
            throw .unreadable(path: path, reason: error.message)
        }
        var grouping = SessionGrouping(keep: keep)
        var fault: String?
        if let capture = captureFormat(format, head: head[...]) {
            if path == "-" {
                var all = head
                do {
                    while try source.read(into: &all, maxCount: 1 << 20) > 0 {}
                } catch {
                    throw .unreadable(path: path, reason: error.message)
                }
                fault = try replay(all, format: capture, into: &grouping)
            } else {
                var reader = CaptureReader(source: try open(), format: capture)
                fault = try replay(into: &grouping) { (r, out, deliver) throws(PlotInputError) in
                    try header(&reader)
                    return r.replay(&reader, into: &out, batch: 1024, deliver: deliver)
                }
            }
        } else {
            try lines(PrefixedByteSource(prefix: head, rest: source)) { (line, n) throws(PlotInputError) in
                try grouping.take(line: line, number: n)
            }
        }
        return (try grouping.finish(), fault)
    }

    /// Replays the capture in `bytes` into `grouping` (``replay(into:_:)``).
    static func replay(_ bytes: [UInt8], format: CaptureFormat, into grouping: inout SessionGrouping)
        throws(PlotInputError) -> String?
    {
        var reader = CaptureReader(source: ArrayByteSource(bytes), format: format)
        return try replay(into: &grouping) { (r, out, deliver) throws(PlotInputError) in
            try header(&reader)
            return r.replay(&reader, into: &out, batch: 1024, deliver: deliver)
        }
    }

    /// Reads the capture's file header.
    static func header<S: ByteSource>(_ reader: inout CaptureReader<S>) throws(PlotInputError) {
        do { try reader.readHeader() } catch { throw .capture("not a capture cuff can read: \(error.message)") }
    }

    /// The capture format `format` names, or the one the first bytes show with `.auto`; nil: NDJSON.
    static func captureFormat(_ format: PlotInputFormat, head: ArraySlice<UInt8>) -> CaptureFormat? {
        switch format {
        case .auto: CaptureFormat.detect(head)
        case .ndjson: nil
        case .btsnoop: .btsnoop
        case .pcap: .pcap
        case .pcapng: .pcapng
        }
    }

    /// The longest NDJSON line read (a record is a few hundred bytes; a longer line is no record).
    public static let maximumLineBytes = 1 << 20

    /// Each line of `source` (without its `\n`, or `\r\n`: probe X, a file saved with Windows line
    /// ends was one long line) with its 1-based number, read in chunks.
    static func lines<Source: ByteSource>(
        _ source: Source, _ body: (String, Int) throws(PlotInputError) -> Void
    ) throws(PlotInputError) {
        var source = source
        var buffer: [UInt8] = []
        var start = 0
        var number = 0
        var ended = false
        func emit(_ bytes: ArraySlice<UInt8>) throws(PlotInputError) {
            number += 1
            if bytes.count > maximumLineBytes {
                throw .badLine(line: number, reason: "longer than \(maximumLineBytes) bytes: not a record")
            }
            let line = bytes.last == 0x0D ? bytes.dropLast() : bytes
            try body(String(decoding: line, as: UTF8.self), number)
        }
        while !ended {
            if start > 0, start >= buffer.count / 2 {
                buffer.removeFirst(start)
                start = 0
            }
            let n: Int
            do { n = try source.read(into: &buffer, maxCount: 64 << 10) } catch {
                throw .unreadable(path: "the input", reason: error.message)
            }
            ended = n == 0
            while let nl = buffer[start...].firstIndex(of: 0x0A) {
                try emit(buffer[start..<nl])
                start = nl + 1
            }
            if buffer.count - start > maximumLineBytes {
                throw .badLine(line: number + 1, reason: "longer than \(maximumLineBytes) bytes: not a record")
            }
        }
        if start < buffer.count { try emit(buffer[start...]) }
    }

    /// Replays a capture in process into `grouping`, record by record (`run` reads the header,
    /// then replays with the deliver function it is given); returns the damage the capture
    /// showed after its first records — the fault that ended it, else the first fragment or
    /// frame skipped (as `cuff replay` says and exits 1 for) — or nil.
    static func replay(
        into grouping: inout SessionGrouping,
        _ run: (inout CaptureReplay, inout [CaptureReplay.Output], (inout [CaptureReplay.Output]) -> Bool)
            throws(PlotInputError) -> CaptureReplay.Ending
    ) throws(PlotInputError) -> String? {
        var config = CuffSessionConfiguration(address: "")
        config.timeout = .seconds(300)
        var replay = CaptureReplay(configuration: config)
        var out: [CaptureReplay.Output] = []
        var sawData = false
        var failure: PlotInputError?
        var skipped: CaptureError?
        func collect(_ out: inout [CaptureReplay.Output]) -> Bool {
            for o in out where failure == nil {
                switch o {
                case let .emit(e):
                    if case .session = e {} else { sawData = true }
                    do { try grouping.take(object: Self.foundation(e.json), line: 0) } catch { failure = error }
                case let .warning(w): if skipped == nil { skipped = w }
                case .log, .notice: break
                }
            }
            out.removeAll(keepingCapacity: true)
            return failure == nil
        }
        let ending = try run(&replay, &out) { collect(&$0) }
        if let failure { throw failure }
        var fault: CaptureError?
        if case let .fault(e) = ending { fault = e }
        replay.finish(after: fault, into: &out)
        _ = collect(&out)
        if let failure { throw failure }
        if !replay.unmapped.isEmpty && !sawData {
            throw .capture(
                "the capture has no service discovery, so its value handles are unknown: map them with `cuff replay FILE --handle HANDLE=UUID … | cuff plot - --output …`"
            )
        }
        guard let damage = fault ?? skipped else { return nil }
        let said = damage.summary
        if fault != nil, grouping.isEmpty { throw .capture("the capture is damaged before any record: \(said)") }
        return said
    }

    /// A record as JSONSerialization gives it (numbers as NSNumber), without the text between.
    static func foundation(_ j: JSON) -> Any {
        switch j {
        case .null: NSNull()
        case let .bool(b): b
        case let .int(i): NSNumber(value: i)
        case let .double(d): NSNumber(value: d)
        case let .string(s): s
        case let .array(a): a.map(foundation)
        case let .object(fields):
            Dictionary(fields.map { ($0.0, foundation($0.1)) }, uniquingKeysWith: { $1 })
        }
    }

    // MARK: NDJSON

    /// Groups records into sessions: a `session` start opens one, its end closes it; progress and
    /// measurement records outside a session get one of their own. Blank lines are skipped; any
    /// other line must be a JSON object. Records of other types are ignored.
    ///
    /// Sessions of different cuffs may overlap (two cuffs measuring at once, on two controllers):
    /// a session is the cuff's whose address its start record names, and the measurement and end
    /// records that name that address go to it. Progress records name no cuff: they go to the
    /// session opened last of those still open. Sessions come in the order they started.
    public static func sessions(lines: [String]) throws(PlotInputError) -> [PlotSession] {
        var grouping = SessionGrouping(keep: nil)
        for (i, line) in lines.enumerated() { try grouping.take(line: line, number: i + 1) }
        return try grouping.finish()
    }

    /// ``sessions(lines:)`` one record at a time (see there). With `keep`, only that session (1 =
    /// the first) keeps its samples and results.
    struct SessionGrouping {
        var out: [PlotSession] = []
        /// The open sessions (indices into `out`), by their cuff's address ("" for none), in the order they opened.
        var open: [(address: String, index: Int)] = []
        /// The session of records that came outside any session, while no session opened since.
        var loose: Int?
        var sawRecord = false
        let keep: Int?

        init(keep: Int?) { self.keep = keep }

        var isEmpty: Bool { !sawRecord }

        /// Whether session `index` keeps its data.
        func keeps(_ index: Int) -> Bool { keep.map { $0 == index + 1 } ?? true }

        /// The open session of the cuff at `address`; else, for a record that names no cuff or no
        /// open session's, the one opened last, or else a session of its own.
        mutating func target(_ address: String?) -> Int {
            if let address, let o = open.last(where: { $0.address == address }) { return o.index }
            if let o = open.last { return o.index }
            if let loose { return loose }
            out.append(PlotSession())
            loose = out.count - 1
            return out.count - 1
        }

        mutating func take(line: String, number: Int) throws(PlotInputError) {
            if line.allSatisfy({ $0 == " " || $0 == "\t" || $0 == "\r" }) { return }
            let object: [String: Any]
            do {
                guard let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                    throw PlotInputError.badLine(line: number, reason: "not a JSON object")
                }
                object = o
            } catch let e as PlotInputError {
                throw e
            } catch {
                throw .badLine(
                    line: number, reason: "not JSON (cuff plot reads cuff's NDJSON output or a capture file)")
            }
            try take(object: object, line: number)
        }

        mutating func take(object: Any, line: Int) throws(PlotInputError) {
            guard let object = object as? [String: Any] else { return }
            switch object["type"] as? String {
            case "session":
                sawRecord = true
                let device = PlotInput.device(object["device"])
                let at = (object["at"] as? String).flatMap(CivilTime.seconds)
                let address = device.address ?? ""
                if object["event"] as? String == "end" {
                    // The session of this cuff; else (a record that names none, or an input that
                    // lost the start) the one the records before it went to, when that one's
                    // cuff is not another's; else one of its own.
                    let index: Int
                    if let o = open.lastIndex(where: { $0.address == address }) {
                        index = open.remove(at: o).index
                    } else if let o = open.indices.last, device.address == nil || open[o].address == "" {
                        index = open.remove(at: o).index
                    } else if let l = loose {
                        index = l
                        loose = nil
                    } else {
                        out.append(PlotSession(startedAt: at))
                        index = out.count - 1
                    }
                    out[index].device.merge(device)
                    out[index].outcome = object["outcome"] as? String
                    out[index].message = object["message"] as? String
                } else {
                    // (A cuff's session with no end, followed by its next one: that one ends here.)
                    open.removeAll { $0.address == address }
                    loose = nil
                    out.append(PlotSession(device: device, startedAt: at))
                    open.append((address, out.count - 1))
                }
            case "progress":
                sawRecord = true
                guard let phase = (object["phase"] as? String).flatMap(Phase.init(rawValue:)) else {
                    throw .badLine(line: line, reason: "a progress record without a phase (inflating or deflating)")
                }
                let unit = try PlotInput.unit(object, line: line)
                let index = target(nil)
                guard keeps(index) else { return }
                out[index].samples.append(
                    PressureSample(
                        phase: phase, pressure: PlotInput.value(object["cuff_pressure"]), unit: unit,
                        elapsed: (object["elapsed"] as? NSNumber)?.doubleValue ?? 0,
                        receivedAt: (object["received_at"] as? String).flatMap(CivilTime.seconds)))
            case "measurement":
                sawRecord = true
                let r = try PlotInput.result(object, line: line)
                let device = PlotInput.device(object["device"])
                let index = target(device.address)
                out[index].device.merge(device)
                if keeps(index) { out[index].results.append(r) }
            default:
                return
            }
        }

        func finish() throws(PlotInputError) -> [PlotSession] {
            guard sawRecord, !out.isEmpty else { throw .noSessions }
            return out
        }
    }

    /// A `measurement` record (as printed, or as ``MeasurementRecord/json`` gives it).
    public static func result(_ o: [String: Any], line: Int) throws(PlotInputError) -> PlotResult {
        let unit = try self.unit(o, line: line)
        var status: StatusFlags?
        if let s = o["status"] as? [String: Any] {
            status = StatusFlags(
                bodyMovement: s["body_movement"] as? Bool ?? false, cuffTooLoose: s["cuff_too_loose"] as? Bool ?? false,
                irregularPulse: s["irregular_pulse"] as? Bool ?? false,
                improperPosition: s["improper_position"] as? Bool ?? false,
                pulseRateRange: s["pulse_rate_range"] as? String ?? "in_range")
        }
        return PlotResult(
            unit: unit, systolic: value(o["systolic"]), diastolic: value(o["diastolic"]),
            meanArterialPressure: value(o["mean_arterial_pressure"]), pulseRate: value(o["pulse_rate"]), status: status,
            deviceTime: o["timestamp"] as? String, receivedAt: (o["received_at"] as? String).flatMap(CivilTime.seconds),
            userID: (o["user_id"] as? NSNumber)?.intValue, stored: o["stored"] as? Bool ?? false)
    }

    static func unit(_ o: [String: Any], line: Int) throws(PlotInputError) -> PressureUnitName {
        guard let u = o["unit"] as? String else { return .mmHg }
        guard let unit = PressureUnitName(rawValue: u) else {
            throw .badLine(line: line, reason: "unknown unit '\(u)' (mmHg or kPa)")
        }
        return unit
    }

    /// A number, a special value's name (`"NaN"`, `"NRes"`, `"+INF"`, `"-INF"`, `"reserved"`), or missing.
    static func value(_ v: Any?) -> PlotValue {
        if let s = v as? String { return .special(s) }
        if let n = v as? NSNumber { return .number(n.doubleValue) }
        return .missing
    }

    static func device(_ v: Any?) -> DeviceLabel {
        guard let d = v as? [String: Any] else { return DeviceLabel() }
        return DeviceLabel(
            address: d["address"] as? String, name: d["name"] as? String, manufacturer: d["manufacturer"] as? String,
            model: d["model"] as? String, serial: d["serial"] as? String)
    }

    // MARK: Store

    /// The readings of the SQLite store at `path`, oldest first. Time is the cuff's own time stamp
    /// when it sent one, else the time received in the host's zone at the time it was stored.
    /// - Parameters:
    ///   - since: keep readings from this time on (seconds since 1970, local)
    ///   - user: keep readings of this user ID only
    ///   - keyPath: the store's key file, for an encrypted store
    public static func history(store path: String, since: Double? = nil, user: Int? = nil, keyPath: String? = nil)
        throws(PlotInputError) -> [HistoryReading]
    {
        try readHistory(store: path, since: since, user: user, keyPath: keyPath).readings
    }

    /// ``history(store:since:user:keyPath:)``, and how many rows could not be read (skipped, and
    /// named on `warn` by row id). The store is opened read-only.
    public static func readHistory(
        store path: String, since: Double? = nil, user: Int? = nil, keyPath: String? = nil,
        warn: SinkWarningHandler = SinkWarnings.ignore
    ) throws(PlotInputError) -> (readings: [HistoryReading], skipped: Int) {
        if path.contains("://") { throw .storeURL(path) }
        guard FileManager.default.fileExists(atPath: path) else { throw .store("\(path): no such store") }
        let read: StoreRecords
        do {
            let key = try keyPath.map { p throws(SinkError) in try StoreKey.load(path: p) }
            let store = try SQLiteStore(
                path: path, mustExist: true, readOnly: true, key: key, warn: SinkWarnings.ignore)
            read = try store.readRecords()
            try store.finish()
        } catch {
            throw .store(String(describing: error))
        }
        read.warn(warn, store: path)
        var out: [HistoryReading] = []
        for (row, record) in read.entries {
            guard
                let o = try? JSONSerialization.jsonObject(
                    with: Data(SessionOutput.measurement(record).json.serialized().utf8)) as? [String: Any]
            else { continue }
            let r = try result(o, line: 0)
            let time =
                r.deviceTime.flatMap(CivilTime.seconds) ?? Double(row.receivedAtMicros) / 1e6
                + Double(row.hostUTCOffsetSeconds)
            if let since, time < since { continue }
            if let user, r.userID != user { continue }
            out.append(HistoryReading(time: time, result: r))
        }
        if out.isEmpty { throw .emptyStore(path: path, filtered: !read.entries.isEmpty) }
        return (out.sorted { $0.time < $1.time }, read.skipped.count)
    }
}

/// Bytes already read (to tell what the input is), then the rest of the source.
struct PrefixedByteSource<Rest: ByteSource>: ByteSource {
    var prefix: [UInt8]
    var rest: Rest

    mutating func read(into buffer: inout [UInt8], maxCount: Int) throws(CaptureError) -> Int {
        guard prefix.isEmpty else {
            let n = min(maxCount, prefix.count)
            buffer.append(contentsOf: prefix[..<n])
            prefix.removeFirst(n)
            return n
        }
        return try rest.read(into: &buffer, maxCount: maxCount)
    }
}
