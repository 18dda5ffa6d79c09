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
    // MARK: Reading bytes

    /// The bytes of `path`, or of stdin for `-`.
    public static func read(_ path: String) throws(PlotInputError) -> [UInt8] {
        if path == "-" { return [UInt8](FileHandle.standardInput.readDataToEndOfFile()) }
        do {
            return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            let reason = (error as NSError).localizedFailureReason ?? (error as NSError).localizedDescription
            throw .unreadable(
                path: path, reason: FileManager.default.fileExists(atPath: path) ? reason : "no such file")
        }
    }

    /// The capture format from the file's first bytes (``CaptureFormat/detect(_:)``), or nil: NDJSON text.
    public static func sniff(_ bytes: [UInt8]) -> CaptureFormat? { CaptureFormat.detect(bytes[...]) }

    /// The sessions in `bytes`: NDJSON as cuff prints it, or a capture replayed as `cuff replay`
    /// would (its records then go through the same NDJSON reading).
    public static func sessions(_ bytes: [UInt8], format: PlotInputFormat = .auto) throws(PlotInputError)
        -> [PlotSession]
    {
        let capture: CaptureFormat?
        switch format {
        case .auto: capture = sniff(bytes)
        case .ndjson: capture = nil
        case .btsnoop: capture = .btsnoop
        case .pcap: capture = .pcap
        case .pcapng: capture = .pcapng
        }
        let lines: [String]
        if let capture {
            lines = try replay(bytes, format: capture)
        } else {
            // (CRLF too: in a Swift string "\r\n" is one Character, which a split on "\n" never
            // matches, so a file saved with Windows line ends was one long line. Probe X.)
            lines = String(decoding: bytes, as: UTF8.self).split(
                omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }
            ).map(String.init)
        }
        return try sessions(lines: lines)
    }

    /// Replays a capture in process; returns its records as NDJSON lines.
    public static func replay(_ bytes: [UInt8], format: CaptureFormat) throws(PlotInputError) -> [String] {
        var reader = CaptureReader(source: ArrayByteSource(bytes), format: format)
        do { try reader.readHeader() } catch { throw .capture("not a capture cuff can read: \(error.message)") }
        var config = CuffSessionConfiguration(address: "")
        config.timeout = .seconds(300)
        var replay = CaptureReplay(configuration: config)
        var out: [CaptureReplay.Output] = []
        var lines: [String] = []
        func collect(_ out: inout [CaptureReplay.Output]) {
            for o in out { if case let .emit(e) = o { lines.append(e.json.serialized()) } }
            out.removeAll(keepingCapacity: true)
        }
        let ending = replay.replay(&reader, into: &out, batch: 1024) {
            collect(&$0); return true
        }
        var fault: CaptureError?
        if case let .fault(e) = ending { fault = e }
        replay.finish(after: fault, into: &out)
        collect(&out)
        if !replay.unmapped.isEmpty
            && lines.allSatisfy({ !$0.contains("\"type\":\"progress\"") && !$0.contains("\"type\":\"measurement\"") })
        {
            throw .capture(
                "the capture has no service discovery, so its value handles are unknown: map them with `cuff replay FILE --handle HANDLE=UUID … | cuff plot - --output …`"
            )
        }
        if let fault, lines.isEmpty {
            throw .capture(
                "the capture is damaged before any record: \(fault.message)"
                    + (fault.offset.map { " (offset \($0))" } ?? ""))
        }
        return lines
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
        var out: [PlotSession] = []
        /// The open sessions (indices into `out`), by their cuff's address ("" for none), in the order they opened.
        var open: [(address: String, index: Int)] = []
        /// The session of records that came outside any session, while no session opened since.
        var loose: Int?
        var sawRecord = false
        /// The open session of the cuff at `address`; else, for a record that names no cuff or no
        /// open session's, the one opened last, or else a session of its own.
        func target(_ address: String?) -> Int {
            if let address, let o = open.last(where: { $0.address == address }) { return o.index }
            if let o = open.last { return o.index }
            if let loose { return loose }
            out.append(PlotSession())
            loose = out.count - 1
            return out.count - 1
        }
        for (i, line) in lines.enumerated() {
            if line.allSatisfy({ $0 == " " || $0 == "\t" || $0 == "\r" }) { continue }
            let object: [String: Any]
            do {
                guard let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                    throw PlotInputError.badLine(line: i + 1, reason: "not a JSON object")
                }
                object = o
            } catch let e as PlotInputError {
                throw e
            } catch {
                throw .badLine(line: i + 1, reason: "not JSON (cuff plot reads cuff's NDJSON output or a capture file)")
            }
            switch object["type"] as? String {
            case "session":
                sawRecord = true
                let device = self.device(object["device"])
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
                    throw .badLine(line: i + 1, reason: "a progress record without a phase (inflating or deflating)")
                }
                let unit = try self.unit(object, line: i + 1)
                let sample = PressureSample(
                    phase: phase, pressure: value(object["cuff_pressure"]), unit: unit,
                    elapsed: (object["elapsed"] as? NSNumber)?.doubleValue ?? 0,
                    receivedAt: (object["received_at"] as? String).flatMap(CivilTime.seconds))
                out[target(nil)].samples.append(sample)
            case "measurement":
                sawRecord = true
                let r = try result(object, line: i + 1)
                let device = self.device(object["device"])
                let index = target(device.address)
                out[index].results.append(r)
                out[index].device.merge(device)
            default:
                continue
            }
        }
        guard sawRecord, !out.isEmpty else { throw .noSessions }
        return out
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
