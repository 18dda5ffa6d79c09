// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession

#if canImport(Glibc)
import Glibc
#endif

/// NDJSON lines built straight into one reusable byte buffer: for every output, the same bytes as
/// `output.json.serialized()` followed by a newline (what ``NDJSONSink`` writes), without building
/// the JSON value of a progress record (most of a session) and without allocating per line.
///
/// For a writer that drains the buffer itself (`cuff replay`): append lines, write ``bytes`` out,
/// ``removeAll()``. Not thread-safe: one owner at a time.
public final class NDJSONLineBuffer: @unchecked Sendable {
    // Unchecked: one owner at a time (see above); the dynamic checks cost more than the writes.
    @exclusivity(unchecked) private var base: UnsafeMutablePointer<UInt8>
    @exclusivity(unchecked) private var capacity: Int
    @exclusivity(unchecked) private var count = 0
    /// Bytes held. (A getter: the unchecked stored property, read from another module, would be
    /// checked there.)
    public var byteCount: Int { count }
    /// The day of the last timestamp written; `prefix` holds its `YYYY-MM-DDT` text (`dayLength`
    /// bytes, longer for years past 9999).
    @exclusivity(unchecked) private var day: Int64 = .min
    @exclusivity(unchecked) private var dayLength = 0
    /// The second of the last timestamp written; `prefix` holds its `YYYY-MM-DDTHH:MM:SS.` text.
    @exclusivity(unchecked) private var second: Int64 = .min
    /// The text of a timestamp up to its milliseconds: at most 9 + 20 + 10 bytes (a year of Int64 range).
    private let prefix = UnsafeMutablePointer<UInt8>.allocate(capacity: 48)

    public init(capacity: Int = 128 * 1024) {
        self.capacity = max(capacity, 1024)
        base = .allocate(capacity: self.capacity)
    }

    deinit {
        base.deallocate()
        prefix.deallocate()
    }

    /// The bytes held, valid until the next call on this buffer.
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Forgets the bytes held (the storage stays).
    public func removeAll() { count = 0 }

    /// Appends one line: `output`'s JSON and a newline.
    public func append(_ output: SessionOutput) {
        switch output {
        case let .progress(p): progress(p)
        case let .session(s): session(s)
        case let .measurement(m): measurement(m)
        }
        ensure(1)
        put(0x0A)
    }

    // MARK: - Records

    /// `{"type":"progress","phase":…,"cuff_pressure":…,"unit":…,"elapsed":…,"received_at":…}`, as ProgressRecord.json.
    ///
    /// The common line (a pressure with an exponent from −3 to 5, an elapsed time of fewer than 10⁹ s)
    /// is written through one local pointer; any other goes the general way.
    func progress(_ p: ProgressRecord) {
        guard case let .finite(m, e) = p.cuffPressure.value, e <= 5, e >= -3, let ms = Self.wholeMilliseconds(p.elapsed) else {
            return progressGeneral(p)
        }
        ensure(160)
        var q = base + count
        Self.put(Self.head(p.phase), &q)
        Self.decimal(Int(m), exponent: Int(e), &q)
        Self.put(Self.unitKey(p.unit), &q)
        Self.milliseconds(ms, &q)
        Self.put(#","received_at":""#, &q)
        iso8601(p.at.wallMicros, &q)
        Self.put("\"}", &q)
        count = q - base
    }

    /// ``progress(_:)`` for any pressure and elapsed time.
    func progressGeneral(_ p: ProgressRecord) {
        // Everything but a special cuff pressure's text fits in 160 bytes.
        ensure(160)
        put(Self.head(p.phase))
        pressure(p.cuffPressure)
        put(Self.unitKey(p.unit))
        milliseconds(p.elapsed)
        put(#","received_at":""#)
        iso8601(p.at.wallMicros)
        put("\"}")
    }

    /// A progress line up to its pressure (one constant per phase).
    @inline(__always) static func head(_ phase: MeasurementPhase) -> StaticString {
        phase == .inflating ? #"{"type":"progress","phase":"inflating","cuff_pressure":"#
                            : #"{"type":"progress","phase":"deflating","cuff_pressure":"#
    }

    /// From after the pressure to the elapsed time (one constant per unit).
    @inline(__always) static func unitKey(_ unit: PressureUnit) -> StaticString {
        unit == .mmHg ? #","unit":"mmHg","elapsed":"# : #","unit":"kPa","elapsed":"#
    }

    /// SFloat.json: the number (``decimal(_:exponent:_:)`` where it applies), or a special value's name.
    func pressure(_ v: SFloat) {
        if case let .finite(m, e) = v.value, e <= 5, e >= -3 {
            ensure(16)
            var q = base + count
            Self.decimal(Int(m), exponent: Int(e), &q)
            count = q - base
        } else if let d = v.doubleValue {
            ensure(32)
            number(d)
        } else {
            string(v.description)
            ensure(96)
        }
    }

    /// SessionRecord.json, without building it: the same keys in the same order.
    func session(_ s: SessionRecord) {
        ensure(48)
        put(s.event == .start ? #"{"type":"session","event":"start","device":"# : #"{"type":"session","event":"end","device":"#)
        device(s.device)
        key(#","name":"#); optional(s.device.name)
        key(#","manufacturer":"#); optional(s.device.manufacturer)
        key(#","model":"#); optional(s.device.model)
        key(#","serial":"#); optional(s.device.serial)
        key(#","address":"#); string(s.device.address)
        key(#","features":"#)
        if let f = s.device.features {
            ensure(1)
            put(0x5B)
            for (n, name) in f.featureNames.enumerated() {
                if n > 0 { ensure(1); put(0x2C) }
                string(name)
            }
            ensure(1)
            put(0x5D)
        } else {
            ensure(4)
            put("null")
        }
        key(#","at":""#)
        iso8601(s.at.wallMicros)
        ensure(1)
        put(0x22)
        if s.event == .end {
            key(#","outcome":"#); optional(s.outcome?.rawValue)
            key(#","measurements":"#)
            ensure(21)
            signed(Int64(s.measurements))
            key(#","message":"#); optional(s.message)
        }
        ensure(1)
        put(0x7D)
    }

    /// SessionOutput.measurement's JSON: the codec's object (its JSON value, as built for every sink)
    /// with `type` set to "measurement", then `device`, `received_at`, `stored`, `sequence_number`
    /// written straight, as MeasurementRecord.json appends them.
    func measurement(_ m: MeasurementRecord) {
        let decoded = m.decoded
        guard case let .object(pairs) = decoded else { json(decoded); return }
        ensure(1)
        put(0x7B)
        var typed = false
        for n in pairs.indices {
            if n > 0 { ensure(1); put(0x2C) }
            string(pairs[n].0)
            ensure(1)
            put(0x3A)
            if !typed && pairs[n].0 == "type" {
                typed = true
                ensure(13)
                put(#""measurement""#)
            } else {
                json(pairs[n].1)
            }
        }
        if !pairs.isEmpty { ensure(1); put(0x2C) }
        key(#""device":"#)
        device(m.device)
        key(#","received_at":""#)
        iso8601(m.receivedAt.wallMicros)
        ensure(64)
        put(m.stored ? #"","stored":true,"sequence_number":"# : #"","stored":false,"sequence_number":"#)
        if let n = m.sequenceNumber { digits(UInt64(n)) } else { put("null") }
        put(0x7D)
    }

    /// DeviceInfo.json.
    func device(_ d: DeviceInfo) {
        key(#"{"address":"#); string(d.address)
        key(#","name":"#); optional(d.name)
        key(#","manufacturer":"#); optional(d.manufacturer)
        key(#","model":"#); optional(d.model)
        key(#","serial":"#); optional(d.serial)
        key(#","firmware":"#); optional(d.firmware)
        ensure(1)
        put(0x7D)
    }

    /// A constant piece (a key with its punctuation).
    @inline(__always) func key(_ s: StaticString) {
        ensure(s.utf8CodeUnitCount)
        put(s)
    }

    /// A string, or `null`.
    func optional(_ s: String?) {
        if let s { string(s) } else { ensure(4); put("null") }
    }

    /// An integer as JSON.int prints it (callers ensure 21 bytes).
    func signed(_ i: Int64) {
        if i < 0 { put(0x2D); digits(i == .min ? UInt64(1) << 63 : UInt64(-i)) } else { digits(UInt64(i)) }
    }

    /// JSON.serialized() (compact), byte for byte.
    func json(_ v: JSON) {
        switch v {
        case .null: ensure(4); put("null")
        case let .bool(b): ensure(5); put(b ? "true" : "false")
        case let .int(i):
            ensure(21)
            signed(i)
        case let .double(d): ensure(32); number(d)
        case let .string(s): string(s)
        case let .array(items):
            ensure(1)
            put(0x5B)
            for (n, item) in items.enumerated() {
                if n > 0 { ensure(1); put(0x2C) }
                json(item)
            }
            ensure(1)
            put(0x5D)
        case let .object(pairs):
            ensure(1)
            put(0x7B)
            for (n, (k, item)) in pairs.enumerated() {
                if n > 0 { ensure(1); put(0x2C) }
                string(k)
                ensure(1)
                put(0x3A)
                json(item)
            }
            ensure(1)
            put(0x7D)
        }
    }

    // MARK: - Pieces (callers `ensure` room first, except `string` and `number`'s long form)

    /// JSON.escape: `"` `\\` and control characters escaped, everything else as UTF-8.
    func string(_ s: String) {
        var s = s
        s.withUTF8 { u in
            // Most strings need no escape: one scan, one copy.
            if !u.contains(where: { $0 == 0x22 || $0 == 0x5C || $0 < 0x20 }) {
                ensure(u.count + 2)
                put(0x22)
                if let p = u.baseAddress { (base + count).update(from: p, count: u.count) }
                count += u.count
                put(0x22)
                return
            }
            ensure(u.count * 6 + 2)
            put(0x22)
            for b in u {
                switch b {
                case 0x22: put(0x5C); put(0x22)
                case 0x5C: put(0x5C); put(0x5C)
                case 0x0A: put(0x5C); put(0x6E)
                case 0x0D: put(0x5C); put(0x72)
                case 0x09: put(0x5C); put(0x74)
                case 0..<0x20:
                    put(0x5C); put(0x75); put(0x30); put(0x30)
                    put(Hex.digit(b >> 4)); put(Hex.digit(b & 0xF))
                default: put(b)
                }
            }
            put(0x22)
        }
    }

    /// JSON.format: the shortest round-trip form, always with a decimal point or exponent.
    func number(_ d: Double) {
        guard d.isFinite else { put("null"); return }
        if d == d.rounded(), abs(d) < 1e9 {
            // Whole numbers print as `127.0` (Double.description does the same below 1e16).
            var v = Int64(d)
            if v == 0 && d.sign == .minus { put("-0.0"); return }
            if v < 0 { put(0x2D); v = -v }
            digits(UInt64(v))
            put(".0")
            return
        }
        let s = d.description
        ensure(s.utf8.count + 2)
        for b in s.utf8 { put(b) }
        if !s.utf8.contains(0x2E), !s.utf8.contains(0x65) { put(".0") }
    }

    /// `(x * 1000).rounded() / 1000` as JSON.format prints it. For |x| < 10⁹ the shortest form of
    /// k/1000 is k/1000 in decimal with trailing zeros dropped (distinct 3-decimal numbers that
    /// small are distinct doubles), so no Double → text conversion is needed.
    func milliseconds(_ x: Double) {
        guard let k = Self.wholeMilliseconds(x) else { number((x * 1000).rounded() / 1000); return }
        ensure(32)
        var q = base + count
        Self.milliseconds(k, &q)
        count = q - base
    }

    /// `m`·10ᵉ (−3 ≤ e ≤ 5, |m| < 2¹¹, an SFLOAT's mantissa) as number() prints the Double SFloat
    /// makes of it (m / 10⁻ᵉ correctly rounded, or m · 10ᵉ exactly): its shortest round-trip form
    /// is the decimal itself: a whole number (< 10⁹) as `n.0`, else trailing zeros dropped with at
    /// least one decimal.
    @inline(__always) static func decimal(_ m: Int, exponent e: Int, _ q: inout UnsafeMutablePointer<UInt8>) {
        if m < 0 { put(0x2D, &q) }
        var v = abs(m)
        guard e < 0 else {
            for _ in 0..<e { v *= 10 }
            digits(UInt64(v), &q)
            put(".0", &q)
            return
        }
        let d = -e
        let scale = d == 1 ? 10 : d == 2 ? 100 : 1000
        digits(UInt64(v / scale), &q)
        put(0x2E, &q)
        var frac = v % scale
        var n = d
        while n > 1 && frac % 10 == 0 { frac /= 10; n -= 1 }  // trailing zeros, keeping one digit
        var i = n
        while i > 0 { i -= 1; q[i] = UInt8(0x30 + frac % 10); frac /= 10 }
        q += n
    }

    /// `x` in whole milliseconds, when the short form applies: finite, under 10⁹ s, not −0.
    @inline(__always) static func wholeMilliseconds(_ x: Double) -> Int64? {
        let r = (x * 1000).rounded()
        guard r.isFinite, abs(r) < 1e12, r != 0 || r.sign == .plus else { return nil }
        return Int64(r)
    }

    /// `k` milliseconds as seconds: digits, a point, three decimals with trailing zeros dropped
    /// (at least one digit).
    @inline(__always) static func milliseconds(_ k: Int64, _ q: inout UnsafeMutablePointer<UInt8>) {
        var k = k
        if k < 0 { put(0x2D, &q); k = -k }
        digits(UInt64(k / 1000), &q)
        let frac = Int(k % 1000)
        let d1 = frac / 100, d2 = frac / 10 % 10, d3 = frac % 10
        q[0] = 0x2E
        q[1] = UInt8(0x30 + d1)
        q += 2
        if d2 != 0 || d3 != 0 { put(UInt8(0x30 + d2), &q) }
        if d3 != 0 { put(UInt8(0x30 + d3), &q) }
    }

    /// Decimal digits of `v` (at most 20 bytes).
    @inline(__always) func digits(_ v: UInt64) {
        var q = base + count
        Self.digits(v, &q)
        count = q - base
    }

    @inline(__always) static func digits(_ v: UInt64, _ q: inout UnsafeMutablePointer<UInt8>) {
        if v < 10 { put(UInt8(0x30 + v), &q); return }
        if v < 100 { q[0] = UInt8(0x30 + v / 10); q[1] = UInt8(0x30 + v % 10); q += 2; return }
        if v < 1000 { q[0] = UInt8(0x30 + v / 100); q[1] = UInt8(0x30 + v / 10 % 10); q[2] = UInt8(0x30 + v % 10); q += 3; return }
        longDigits(v, &q)
    }

    static func longDigits(_ v: UInt64, _ q: inout UnsafeMutablePointer<UInt8>) {
        var n = v
        var len = 1
        var t = n / 10
        while t > 0 { len += 1; t /= 10 }
        q += len
        var i = q
        repeat { i -= 1; i.pointee = UInt8(0x30 + n % 10); n /= 10 } while n > 0
    }

    /// EventTime.iso8601: `2026-11-22T07:31:54.123Z`.
    func iso8601(_ wallMicros: Int64) {
        ensure(48)
        var q = base + count
        iso8601(wallMicros, &q)
        count = q - base
    }

    /// ``iso8601(_:)`` at `q` (at most 14 + 9 + 4 bytes); the text up to the seconds is computed
    /// once per second (a cuff notifies several times a second), the date once per day.
    @inline(__always) func iso8601(_ wallMicros: Int64, _ q: inout UnsafeMutablePointer<UInt8>) {
        // Floor division with no intermediate that can overflow (any Int64 will do).
        let rest = wallMicros % 1_000_000
        let secs = wallMicros / 1_000_000 - (rest < 0 ? 1 : 0)
        if secs != second { newSecond(secs) }
        let n = dayLength + 9
        q.update(from: prefix, count: n)
        let ms = Int((rest < 0 ? rest + 1_000_000 : rest) / 1000)
        q[n] = UInt8(0x30 + ms / 100)
        q[n + 1] = UInt8(0x30 + ms / 10 % 10)
        q[n + 2] = UInt8(0x30 + ms % 10)
        q[n + 3] = 0x5A
        q += n + 4
    }

    /// Rewrites the cached `YYYY-MM-DDTHH:MM:SS.` for another second (and the date for another day).
    func newSecond(_ secs: Int64) {
        second = secs
        let r = secs % 86400
        let d = secs / 86400 - (r < 0 ? 1 : 0)
        if d != day {
            day = d
            // "YYYY-MM-DDT00:00:00" from the formatter EventTime.iso8601 uses, once per day: keep
            // "YYYY-MM-DDT". (In seconds, not µs: the day's start in µs may not fit in 64 bits.)
            var full = DateTime(unixSeconds: d * 86400).description
            full.withUTF8 { u in
                dayLength = u.count - 8
                prefix.update(from: u.baseAddress!, count: dayLength)
            }
        }
        let tod = Int(r < 0 ? r + 86400 : r)
        let p = prefix + dayLength
        let h = tod / 3600, m = tod / 60 % 60, s = tod % 60
        p[0] = UInt8(0x30 + h / 10); p[1] = UInt8(0x30 + h % 10); p[2] = 0x3A
        p[3] = UInt8(0x30 + m / 10); p[4] = UInt8(0x30 + m % 10); p[5] = 0x3A
        p[6] = UInt8(0x30 + s / 10); p[7] = UInt8(0x30 + s % 10); p[8] = 0x2E
    }

    // MARK: - Storage

    /// Makes room for `n` more bytes.
    @inline(__always) func ensure(_ n: Int) {
        if count + n > capacity { grow(n) }
    }

    func grow(_ n: Int) {
        // Slack past `n`, so a caller's earlier `ensure` still holds after a nested one grew the buffer.
        let newCapacity = max(capacity * 2, count + n + 1024)
        let new = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        new.update(from: base, count: count)
        base.deallocate()
        base = new
        capacity = newCapacity
    }

    @inline(__always) func put(_ b: UInt8) {
        base[count] = b
        count += 1
    }

    @inline(__always) func put(_ s: StaticString) {
        (base + count).update(from: s.utf8Start, count: s.utf8CodeUnitCount)
        count += s.utf8CodeUnitCount
    }

    // Through a local pointer (the caller ensured room and stores the count after).
    @inline(__always) static func put(_ b: UInt8, _ q: inout UnsafeMutablePointer<UInt8>) {
        q.pointee = b
        q += 1
    }

    @inline(__always) static func put(_ s: StaticString, _ q: inout UnsafeMutablePointer<UInt8>) {
        q.update(from: s.utf8Start, count: s.utf8CodeUnitCount)
        q += s.utf8CodeUnitCount
    }
}
