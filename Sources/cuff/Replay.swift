// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import BloodPressure
import Capture
import CuffCore
import CuffSession
import Sinks
#if canImport(Glibc)
import Glibc
#endif

struct Replay: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replay a capture (btsnoop, pcap, pcapng) of a cuff session: print the records a live session gave.",
        discussion: """
            Reads btsnoop (1001, 1002, 2001 = btmon -w), pcap and pcapng (link types 201, 254, 256), \
            follows every connection where a controller in the capture is the central, and prints the \
            session, progress and measurement records `cuff measure` would have printed, with the \
            capture's timestamps as received_at. Several connections, cuffs and controllers in one file \
            are kept apart; --adapter keeps one controller.

            A capture without service discovery (a bonded reconnect) needs --handle VALUE_HANDLE=UUID, \
            e.g. --handle 0x0012=2a35; without it, cuff replay lists the handles that carried values.

            Exit status: 0 at least one measurement and no fault; 1 the capture is damaged (the records \
            before the fault are printed; the error names the file offset); 2 no measurement; 7 values \
            on handles nothing maps (use --handle); 10 a sink failed.
            """
    )

    @Argument(help: "The capture file.")
    var file: String

    @Option(name: .customLong("capture-format"), help: "auto (default: from the magic), btsnoop, pcap or pcapng.", transform: { s in
        guard let f = CaptureFormat(rawValue: s) else { throw ValidationError("--capture-format takes auto, btsnoop, pcap or pcapng") }
        return f
    })
    var captureFormat: CaptureFormat = .auto

    @Option(name: .customLong("handle"), help: ArgumentHelp("Map a value handle to a characteristic: HANDLE=UUID, e.g. 0x0012=2a35 (repeatable).", valueName: "H=UUID"),
            transform: Replay.parseHandle)
    var handles: [HandleMapping] = []

    @Option(help: "Only this controller (hciN index, as in the capture).")
    var adapter: UInt16?

    @Flag(help: "Pace the replay by the capture's timestamps instead of going as fast as possible.")
    var realtime = false

    @OptionGroup var sinks: SinkOptions

    struct HandleMapping: Sendable {
        var handle: UInt16
        var characteristic: CuffCharacteristic
    }

    static func parseHandle(_ s: String) throws -> HandleMapping {
        let parts = s.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { throw ValidationError("--handle takes HANDLE=UUID, e.g. 0x0012=2a35; got '\(s)'") }
        var h = Substring(parts[0])
        if h.hasPrefix("0x") || h.hasPrefix("0X") { h = h.dropFirst(2) }
        guard let handle = UInt16(h, radix: 16), handle > 0 else {
            throw ValidationError("--handle: '\(parts[0])' is not an attribute handle (hex, 0x0001–0xFFFF)")
        }
        var u = Substring(parts[1].lowercased())
        if u.hasPrefix("0x") { u = u.dropFirst(2) }
        let c: CuffCharacteristic?
        if let v = UInt16(u, radix: 16), u.count == 4 {
            c = CuffCharacteristic(uuid16: v)
        } else if let full = UUIDText.uuid16(of: String(u)) {
            c = CuffCharacteristic(uuid16: full)
        } else {
            c = String(u) == CuffControl.controlPointUUID.lowercased() ? .cuffControl : nil
        }
        guard let c else {
            throw ValidationError("--handle: '\(parts[1])' is not a characteristic cuff knows (2a35 2a36 2a49 2b34 2b35 2b36 2a52 2a2b 2a00 2a29 2a24 2a25 2a26)")
        }
        return HandleMapping(handle: handle, characteristic: c)
    }

    func run() throws {
        let display = ProgressDisplay(quiet: sinks.quiet)
        let fan: FanOutSink
        do {
            // The store first (a record it cannot keep is not printed), then stdout; NDJSON through
            // the replay's own buffered writer (same bytes as NDJSONSink, fewer syscalls).
            var list: [any SampleSink & Sendable] = []
            if let path = sinks.store { list.append(try SQLiteStore(path: path)) }
            list.append(sinks.format == "ndjson" ? ReplayNDJSONSink(flushEachRecord: realtime || sinks.store != nil) : SinkFactory.formatSink(sinks.configuration, output: FileDescriptorOutput.standardOutput(), warn: sinks.quiet ? SinkWarnings.ignore : SinkWarnings.standardError))
            fan = FanOutSink(list)
        } catch {
            Output.log("cuff replay: \(error)")
            throw ExitCode(10)
        }
        var reader: CaptureReader<FileByteSource>
        do {
            reader = try CaptureReader(path: file, format: captureFormat)
        } catch {
            Output.log("cuff replay: \(error.message)")
            throw ExitCode(1)
        }
        var overrides: [UInt16: CuffCharacteristic] = [:]
        for m in handles { overrides[m.handle] = m.characteristic }
        var config = CuffSessionConfiguration(address: "")
        config.timeout = .seconds(300)
        var replay = CaptureReplay(configuration: config, adapter: adapter, overrides: overrides)
        var out: [CaptureReplay.Output] = []
        out.reserveCapacity(64)
        var fault: CaptureError?
        var warnings = 0
        var sinkFailed = false
        let pacer = realtime ? Pacer() : nil

        func drain() -> Bool {
            for o in out {
                switch o {
                case let .emit(e):
                    display.show(e)
                    do { try fan.write(e) } catch {
                        Output.log("cuff replay: \(error)")
                        sinkFailed = true
                        return false
                    }
                case let .log(s):
                    display.log(s)
                case let .warning(w):
                    warnings += 1
                    Output.log("cuff replay: \(file): \(Replay.describe(w))")
                }
            }
            out.removeAll(keepingCapacity: true)
            return true
        }

        reading: while true {
            do {
                guard let record = try reader.nextFromFile() else { break }
                pacer?.wait(until: record.timestamp)
                replay.consume(record, into: &out)
                if !out.isEmpty, !drain() { break reading }
            } catch {
                if error.isRecoverable {
                    warnings += 1
                    Output.log("cuff replay: \(file): \(Replay.describe(error))")
                    continue
                }
                fault = error
                break
            }
        }
        if !sinkFailed {
            replay.finish(fault == nil ? "the capture ends" : "the capture breaks off", into: &out)
            _ = drain()
        }
        do { try fan.finish() } catch { Output.log("cuff replay: \(error)"); sinkFailed = true }
        display.clearGauge()
        // One hint per controller and set of handles, however many connections showed it.
        var groups: [(key: String, first: CaptureReplay.Unmapped, connections: Int, totals: [UInt16: CaptureReplay.Unmapped.Counts])] = []
        for u in replay.unmapped {
            let key = "\(u.adapter)|\(u.address)|" + u.handles.keys.sorted().map { String($0) }.joined(separator: ",")
            if let i = groups.firstIndex(where: { $0.key == key }) {
                groups[i].connections += 1
                for (h, n) in u.handles {
                    groups[i].totals[h, default: .init()].notifications += n.notifications
                    groups[i].totals[h, default: .init()].indications += n.indications
                }
            } else {
                groups.append((key, u, 1, u.handles))
            }
        }
        for g in groups {
            let list = g.totals.keys.sorted().map { h -> String in
                let n = g.totals[h]!
                var kinds: [String] = []
                if n.indications > 0 { kinds.append("\(n.indications) indication\(n.indications == 1 ? "" : "s")") }
                if n.notifications > 0 { kinds.append("\(n.notifications) notification\(n.notifications == 1 ? "" : "s")") }
                return "\(Replay.hex4(h)) (\(kinds.joined(separator: ", ")))"
            }
            let conns = g.connections == 1 ? "connection \(Replay.hex4(g.first.connectionHandle))" : "\(g.connections) connections"
            Output.log("cuff replay: hci\(g.first.adapter) \(conns) to \(g.first.address): no service discovery in the capture, so these value handles are unknown: \(list.joined(separator: ", ")).")
            let example = g.totals.keys.sorted().map { h -> String in
                "--handle \(Replay.hex4(h))=\(g.totals[h]!.indications > 0 ? "2a35" : "2a36")"
            }.joined(separator: " ")
            Output.log("cuff replay: map them with --handle HANDLE=UUID (indications usually carry the Blood Pressure Measurement 2a35, or 2b34 enhanced; notifications the Intermediate Cuff Pressure 2a36, or 2b35), e.g. cuff replay \(file) \(example)")
        }
        if let fault {
            Output.log("cuff replay: \(file): \(Replay.describe(fault))")
        }
        if !sinks.quiet {
            Output.log("cuff replay: \(replay.sessions) session\(replay.sessions == 1 ? "" : "s"), \(replay.measurements) measurement\(replay.measurements == 1 ? "" : "s")")
        }
        if sinkFailed { throw ExitCode(10) }
        if fault != nil || warnings > 0 { throw ExitCode(1) }
        if !replay.unmapped.isEmpty { throw ExitCode(7) }
        if replay.measurements == 0 { throw ExitCode(2) }
    }

    static func describe(_ e: CaptureError) -> String {
        var s = "\(e.code.rawValue)"
        if let o = e.offset { s += " at offset \(o)" }
        if !e.message.isEmpty { s += ": " + e.message }
        return s
    }

    static func hex4(_ v: UInt16) -> String {
        let s = String(v, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: max(0, 4 - s.count)) + s
    }
}

/// `--realtime`: sleeps so records go out at the pace of their timestamps.
final class Pacer {
    var first: (capture: Timestamp, real: Timestamp)?

    func wait(until t: Timestamp) {
        let now = Pacer.monotonic()
        guard let f = first else { first = (t, now); return }
        let due = f.real + (t - f.capture)
        let left = due - now
        guard left > .zero else { return }
        var ts = timespec(tv_sec: Int(left.nanoseconds / 1_000_000_000), tv_nsec: Int(left.nanoseconds % 1_000_000_000))
        nanosleep(&ts, nil)
    }

    static func monotonic() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Timestamp(nanoseconds: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec))
    }
}

enum UUIDText {
    /// The 16-bit alias of a 128-bit Base-UUID text (with or without dashes).
    static func uuid16(of s: String) -> UInt16? {
        let hex = s.filter { $0 != "-" }
        guard hex.count == 32, hex.hasPrefix("0000"), hex.hasSuffix("00001000800000805f9b34fb") else { return nil }
        return UInt16(hex.dropFirst(4).prefix(4), radix: 16)
    }
}

/// `cuff replay`'s NDJSON on stdout: the same bytes as ``NDJSONSink`` (`SessionOutput.json`,
/// serialised, one per line), buffered in 64 KiB writes instead of one write per record (a replay
/// has no cuff waiting for a confirmation). `flushEachRecord` (for `--realtime`) delivers every line at once.
final class ReplayNDJSONSink: SampleSink, @unchecked Sendable {
    let fd: Int32
    let flushEachRecord: Bool
    var encoder = NDJSONBytes()

    init(fd: Int32 = 1, flushEachRecord: Bool) {
        self.fd = fd
        self.flushEachRecord = flushEachRecord
    }

    func write(_ o: SessionOutput) throws(SinkError) {
        encoder.record(o)
        if flushEachRecord || encoder.buffer.count >= 64 * 1024 { try drain() }
    }

    func finish() throws(SinkError) { try drain() }

    func drain() throws(SinkError) {
        var off = 0
        defer { encoder.buffer.removeAll(keepingCapacity: true) }
        while off < encoder.buffer.count {
            let n = encoder.buffer.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + off, $0.count - off) }
            if n < 0 {
                if errno == EINTR { continue }
                throw SinkError.writeFailed(destination: "stdout", errno: errno)
            }
            off += n
        }
    }
}

/// NDJSON lines as bytes, equal to `SessionOutput.json.serialized()` + newline: a byte-level JSON
/// writer, with progress records (most of a session) written without building their JSON value.
struct NDJSONBytes {
    var buffer: [UInt8] = []
    var day: Int64 = .min
    var dayText: [UInt8] = []

    init() { buffer.reserveCapacity(80 * 1024) }

    mutating func record(_ o: SessionOutput) {
        if case let .progress(p) = o {
            progress(p)
        } else {
            json(o.json)
        }
        buffer.append(0x0A)
    }

    /// `{"type":"progress","phase":…,"cuff_pressure":…,"unit":…,"elapsed":…,"received_at":…}`, as ProgressRecord.json.
    mutating func progress(_ p: ProgressRecord) {
        append(#"{"type":"progress","phase":""#)
        append(p.phase == .inflating ? "inflating" : "deflating")
        append(#"","cuff_pressure":"#)
        if let d = p.cuffPressure.doubleValue { number(d) } else { append("\""); append(p.cuffPressure.description); append("\"") }
        append(#","unit":""#)
        append(p.unit == .mmHg ? "mmHg" : "kPa")
        append(#"","elapsed":"#)
        milliseconds(p.elapsed)
        append(#","received_at":""#)
        iso8601(p.at.wallMicros)
        append("\"}")
    }

    /// JSON.serialized() (compact), byte for byte.
    mutating func json(_ v: JSON) {
        switch v {
        case .null: append("null")
        case let .bool(b): append(b ? "true" : "false")
        case let .int(i):
            if i < 0 { buffer.append(0x2D); digits(i == .min ? UInt64(1) << 63 : UInt64(-i)) } else { digits(UInt64(i)) }
        case let .double(d): number(d)
        case let .string(s): string(s)
        case let .array(items):
            buffer.append(0x5B)
            for (n, item) in items.enumerated() {
                if n > 0 { buffer.append(0x2C) }
                json(item)
            }
            buffer.append(0x5D)
        case let .object(pairs):
            buffer.append(0x7B)
            for (n, (k, item)) in pairs.enumerated() {
                if n > 0 { buffer.append(0x2C) }
                string(k)
                buffer.append(0x3A)
                json(item)
            }
            buffer.append(0x7D)
        }
    }

    /// JSON.escape: `"` `\\` and control characters escaped, everything else as UTF-8.
    mutating func string(_ s: String) {
        buffer.append(0x22)
        var s = s
        s.withUTF8 { u in
            for b in u {
                switch b {
                case 0x22: buffer.append(0x5C); buffer.append(0x22)
                case 0x5C: buffer.append(0x5C); buffer.append(0x5C)
                case 0x0A: buffer.append(0x5C); buffer.append(0x6E)
                case 0x0D: buffer.append(0x5C); buffer.append(0x72)
                case 0x09: buffer.append(0x5C); buffer.append(0x74)
                case 0..<0x20:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    buffer.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 0xF)]])
                default: buffer.append(b)
                }
            }
        }
        buffer.append(0x22)
    }

    @inline(__always) mutating func append(_ s: StaticString) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    mutating func append(_ s: String) { buffer.append(contentsOf: s.utf8) }

    /// `(x * 1000).rounded() / 1000` as JSON.format prints it. For |x| < 10⁹ the shortest form of
    /// k/1000 is k/1000 in decimal with trailing zeros dropped (distinct 3-decimal numbers that
    /// small are distinct doubles), so no Double → text conversion is needed.
    mutating func milliseconds(_ x: Double) {
        let r = (x * 1000).rounded()
        guard r.isFinite, abs(r) < 1e12, r != 0 || r.sign == .plus else { number(r / 1000); return }
        var k = Int64(r)
        if k < 0 { buffer.append(0x2D); k = -k }
        digits(UInt64(k / 1000))
        buffer.append(0x2E)
        var frac = Int(k % 1000)
        if frac == 0 { buffer.append(0x30); return }
        var width = 3
        while frac % 10 == 0 { frac /= 10; width -= 1 }
        var div = 1
        for _ in 1..<width { div *= 10 }
        while div > 0 { buffer.append(UInt8(0x30 + frac / div % 10)); div /= 10 }
    }

    /// JSON.format: the shortest round-trip form, always with a decimal point or exponent.
    mutating func number(_ d: Double) {
        guard d.isFinite else { append("null"); return }
        if d == d.rounded(), abs(d) < 1e9 {
            // Whole numbers print as `127.0` (Double.description does the same below 1e16).
            var v = Int64(d)
            if v == 0 && d.sign == .minus { append("-0.0"); return }
            if v < 0 { buffer.append(0x2D); v = -v }
            digits(UInt64(v))
            append(".0")
            return
        }
        let s = d.description
        append(s)
        if !s.contains("."), !s.contains("e") { append(".0") }
    }

    mutating func digits(_ v: UInt64) {
        var tmp: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                  UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var n = v, i = 20
        withUnsafeMutableBytes(of: &tmp) { b in
            repeat { i -= 1; b[i] = UInt8(0x30 + n % 10); n /= 10 } while n > 0
        }
        withUnsafeBytes(of: &tmp) { b in buffer.append(contentsOf: b[i..<20]) }
    }

    /// EventTime.iso8601: `2026-11-22T07:31:54.123Z`; the date is computed once per day.
    mutating func iso8601(_ wallMicros: Int64) {
        let secs = wallMicros >= 0 ? wallMicros / 1_000_000 : (wallMicros - 999_999) / 1_000_000
        let d = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400
        if d != day {
            day = d
            let full = EventTime.iso8601(wallMicros: d * 86_400_000_000)  // "YYYY-MM-DDT00:00:00.000Z"
            dayText = Array(full.utf8.dropLast(13))
        }
        buffer.append(contentsOf: dayText)
        let tod = Int(secs - d * 86400)
        two(tod / 3600)
        buffer.append(0x3A)
        two(tod / 60 % 60)
        buffer.append(0x3A)
        two(tod % 60)
        let ms = Int((wallMicros - secs * 1_000_000) / 1000)
        buffer.append(0x2E)
        buffer.append(UInt8(0x30 + ms / 100))
        buffer.append(UInt8(0x30 + ms / 10 % 10))
        buffer.append(UInt8(0x30 + ms % 10))
        buffer.append(0x5A)
    }

    @inline(__always) mutating func two(_ v: Int) {
        buffer.append(UInt8(0x30 + v / 10))
        buffer.append(UInt8(0x30 + v % 10))
    }

}
