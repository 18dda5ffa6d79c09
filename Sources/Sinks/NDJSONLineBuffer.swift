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
public final class NDJSONLineBuffer: JSONWriter, ProgressRecordSink, @unchecked Sendable {
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
    /// (Aligned for word loads, and every byte set: ``iso8601(_:_:)`` copies 32 bytes at a time.)
    private let prefix: UnsafeMutablePointer<UInt8>

    public init(capacity: Int = 128 * 1024) {
        self.capacity = max(capacity, 1024)
        base = .allocate(capacity: self.capacity)
        prefix = UnsafeMutableRawPointer.allocate(byteCount: 48, alignment: 8).bindMemory(to: UInt8.self, capacity: 48)
        prefix.initialize(repeating: 0, count: 48)
    }

    deinit {
        base.deallocate()
        UnsafeMutableRawPointer(prefix).deallocate()
    }

    /// The bytes held, valid until the next call on this buffer.
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Forgets the bytes held (the storage stays).
    public func removeAll() { count = 0 }

    /// Appends one line: `output`'s JSON and a newline.
    public func append(_ output: SessionOutput) {
        switch output {
        case let .progress(p): append(progress: p)
        case let .session(s): append(session: s)
        case let .measurement(m): append(measurement: m)
        }
    }

    /// Appends a measurement line, the bytes `SessionOutput.write(to:)` gives, key by key but for
    /// the device object: the kept text of a device written before is copied (a reconnecting
    /// cuff's result carries the device its last session line did; quoting its six strings again
    /// was a fifth of the line).
    public func append(measurement m: MeasurementRecord) {
        var w = self
        comma = false
        m.write(to: &w, typeAsMeasurement: true) { w, d in w.deviceObject(d) }
        ensure(1)
        put(0x0A)
    }

    /// Appends `output`'s line through the records' own `write(to:)`, key by key (the shape's one
    /// definition; ``append(progress:)`` is proven equal to it).
    func appendWritten(_ output: SessionOutput) {
        var w = self
        comma = false
        output.write(to: &w)
        ensure(1)
        put(0x0A)
    }

    /// ``append(progress:)`` (a replay hands its progress records straight here).
    public func take(progress p: ProgressRecord) { append(progress: p) }

    /// Appends a progress line (most of a session's), the bytes `ProgressRecord.write(to:)` gives,
    /// in one go: room made once, the fixed parts copied as constants, the numbers and the time
    /// written straight from the record (the SFLOAT's text from its mantissa and exponent, no
    /// Double). Values that text does not cover (an SFLOAT exponent outside −3…5, an elapsed time
    /// that is not a whole number of milliseconds under 10⁹ s, or is −0) take ``appendWritten(_:)``.
    /// Returns ``byteCount``.
    @discardableResult public func append(progress p: ProgressRecord) -> Int {
        // Elapsed in milliseconds, rounded half away from zero as `rounded()` does, without a
        // call to round: x − trunc(x) is exact for |x| < 10¹².
        let x = p.elapsed * 1000
        guard abs(x) < 1e12 else { appendWritten(.progress(p)); return count }
        var ms = Int(x)
        let f = x - Double(ms)
        if f >= 0.5 { ms += 1 } else if f <= -0.5 { ms -= 1 }
        let special = p.cuffPressure.specialNameConstant
        let e = Int(p.cuffPressure.exponent)
        guard abs(ms) < 1_000_000_000_000, ms != 0 || x.sign == .plus, special != nil || (e >= -3 && e <= 5) else {
            appendWritten(.progress(p))
            return count
        }
        // 54 + 10 + 25 + 14 + 16 + 43 + 3 bytes at most.
        ensure(192)
        var q = base + count
        if p.phase == .inflating {
            Self.put(#"{"type":"progress","phase":"inflating","cuff_pressure":"#, &q)
        } else {
            Self.put(#"{"type":"progress","phase":"deflating","cuff_pressure":"#, &q)
        }
        if let special {
            Self.put(0x22, &q)
            Self.put(special, &q)
            Self.put(0x22, &q)
        } else {
            Self.decimal(Int(p.cuffPressure.mantissa), exponent: e, &q)
        }
        if p.unit == .mmHg {
            Self.put(#","unit":"mmHg","elapsed":"#, &q)
        } else {
            Self.put(#","unit":"kPa","elapsed":"#, &q)
        }
        Self.milliseconds(ms, &q)
        Self.put(#","received_at":""#, &q)
        iso8601(p.at.wallMicros, &q)
        Self.put("\"}\n", &q)
        count = q - base
        return count
    }

    /// Appends a session line, the bytes `SessionRecord.write(to:)` gives, with runs of keys and
    /// punctuation copied as single constants (no per-key call, no comma bookkeeping).
    public func append(session s: SessionRecord) {
        fragment(
            s.event == .start
                ? #"{"type":"session","event":"start","device":"#
                : #"{"type":"session","event":"end","device":"#)
        deviceRun(s.device)
        fragment(#","features":"#)
        if let f = s.device.features {
            comma = false
            var w = self
            f.writeNames(to: &w)
        } else {
            fragment("null")
        }
        fragment(#","at":""#)
        ensure(48)
        var q = base + count
        iso8601(s.at.wallMicros, &q)
        count = q - base
        if s.event == .end {
            fragment(#"","outcome":"#)
            if let o = s.outcome { quoted(o.rawValue) } else { fragment("null") }
            fragment(#","measurements":"#)
            signed(Int64(s.measurements))
            fragment(#","message":"#)
            optional(s.message)
            fragment(#","att_requests":"#)
            intOrNull(s.attRequests)
            fragment(#","att_requests_before_reading":"#)
            intOrNull(s.attRequestsBeforeReading)
            if let g = s.gattCache {
                fragment(#","gatt_cache":""#)
                fragment(g.name)
                fragment(#"""#)
            } else {
                fragment(#","gatt_cache":null"#)
            }
            if let c = s.clockDriftSeconds {
                fragment(#","clock_drift_s":"#)
                signed(c)
            }
            fragment("}\n")
        } else {
            fragment("\"}\n")
        }
    }

    /// The device's text in a session line, from its object to the address beside it:
    /// `{"address":…,"name":…,…,"firmware":…},"name":…,…,"serial":…,"address":…`. A session's
    /// lines, and the next session's on a reconnect, carry one of two devices (the start line
    /// before Device Information is read, the end line after): the text of the last two is kept
    /// and copied while the device is one of them (comparing equal strings of the same storage is
    /// one compare each; escaping a dozen strings again was most of the line).
    private func deviceRun(_ d: DeviceInfo) {
        keep(d)
        copyKept(recentText.count)
    }

    /// The device's object alone (its kept text up to the object's end), as `DeviceInfo.write(to:)`
    /// gives it.
    fileprivate func deviceObject(_ d: DeviceInfo) {
        separate()
        keep(d)
        copyKept(recentObjectLength)
        comma = true
    }

    /// Makes `d`'s text the most recent kept one: found among the two kept, or written past the
    /// buffer's bytes and taken back out.
    private func keep(_ d: DeviceInfo) {
        if Self.sameText(recentDevice, d) { return }
        if Self.sameText(olderDevice, d) {
            swapKept()
            return
        }
        let from = count
        fragment(#"{"address":"#)
        quoted(d.address)
        nameToSerial(of: d)
        fragment(#","firmware":"#)
        optional(d.firmware)
        fragment("}")
        let objectEnd = count
        nameToSerial(of: d)
        fragment(#","address":"#)
        quoted(d.address)
        // The older one goes; its array's storage is reused for this one's text.
        swapKept()
        recentDevice = d
        recentObjectLength = objectEnd - from
        recentText.removeAll(keepingCapacity: true)
        recentText.append(contentsOf: UnsafeBufferPointer(start: base + from, count: count - from))
        count = from
    }

    @inline(__always) private func swapKept() {
        swap(&recentDevice, &olderDevice)
        swap(&recentText, &olderText)
        swap(&recentObjectLength, &olderObjectLength)
    }

    /// Copies the first `n` bytes of the most recent kept text.
    @inline(__always) private func copyKept(_ n: Int) {
        ensure(n + 21)
        recentText.withUnsafeBufferPointer { Self.copy($0.baseAddress!, to: base + count, n) }
        count += n
    }

    /// The two devices whose session-line text is kept (the most recent first), the texts, and
    /// where each text's device object ends.
    @exclusivity(unchecked) private var recentDevice: DeviceInfo?
    @exclusivity(unchecked) private var olderDevice: DeviceInfo?
    @exclusivity(unchecked) private var recentText: [UInt8] = []
    @exclusivity(unchecked) private var olderText: [UInt8] = []
    @exclusivity(unchecked) private var recentObjectLength = 0
    @exclusivity(unchecked) private var olderObjectLength = 0

    /// Whether `a` gives the same session-line text as `b` (features are written apart).
    @inline(__always) private static func sameText(_ a: DeviceInfo?, _ b: DeviceInfo) -> Bool {
        guard let a else { return false }
        return a.address == b.address && a.name == b.name && a.manufacturer == b.manufacturer && a.model == b.model
            && a.serial == b.serial && a.firmware == b.firmware
    }

    /// `,"name":…,"manufacturer":…,"model":…,"serial":…` (in the device object and again beside it).
    @inline(__always) private func nameToSerial(of d: DeviceInfo) {
        fragment(#","name":"#)
        optional(d.name)
        fragment(#","manufacturer":"#)
        optional(d.manufacturer)
        fragment(#","model":"#)
        optional(d.model)
        fragment(#","serial":"#)
        optional(d.serial)
    }

    /// A constant run of JSON text (room made for it).
    @inline(__always) private func fragment(_ s: StaticString) {
        ensure(s.utf8CodeUnitCount + 21)  // (and for a number after it)
        put(s)
    }

    @inline(__always) private func optional(_ s: String?) {
        if let s { quoted(s) } else { fragment("null") }
    }

    @inline(__always) private func intOrNull(_ i: Int?) {
        if let i { signed(Int64(i)) } else { fragment("null") }
    }

    /// `m.decoded.serialized()`'s text, written straight from the record (no ``JSON`` value
    /// built). Uses the buffer: whatever it held is gone, and it is left empty.
    public func decodedText(of m: MeasurementRecord) -> String {
        count = 0
        comma = false
        var w = self
        m.writeDecodedObject(to: &w)
        let text = String(decoding: bytes, as: UTF8.self)
        count = 0
        return text
    }

    // MARK: - JSONWriter: the records' one shape (SessionOutput.write), written as bytes

    /// A comma goes before the next key or array item.
    @exclusivity(unchecked) private var comma = false

    @inline(__always) private func separate() {
        if comma { ensure(1); put(0x2C) }
    }

    public func beginObject() { separate(); ensure(1); put(0x7B); comma = false }
    public func endObject() { ensure(1); put(0x7D); comma = true }
    public func beginArray() { separate(); ensure(1); put(0x5B); comma = false }
    public func endArray() { ensure(1); put(0x5D); comma = true }

    public func key(_ k: StaticString) {
        // Through a local pointer, the count stored once (the commonest write of all).
        let n = k.utf8CodeUnitCount
        ensure(n + 4)
        var q = base + count
        if comma { Self.put(0x2C, &q) }
        q[0] = 0x22
        Self.copy(k.utf8Start, to: q + 1, n)
        q[n + 1] = 0x22
        q[n + 2] = 0x3A
        count = q + (n + 3) - base
        comma = false
    }

    public func dynamicKey(_ k: String) {
        separate()
        quoted(k)
        ensure(1)
        put(0x3A)
        comma = false
    }

    public func null() { separate(); ensure(4); put("null"); comma = true }
    public func bool(_ b: Bool) { separate(); ensure(5); put(b ? "true" : "false"); comma = true }

    public func int(_ i: Int64) {
        separate()
        ensure(21)
        signed(i)
        comma = true
    }

    public func double(_ d: Double) {
        separate()
        ensure(32)
        number(d)
        comma = true
    }

    /// `m`·10ᵉ straight from its digits where that gives Double.description's text: an SFLOAT
    /// (−3 ≤ e ≤ 5, |m| < 2¹¹) or a count of milliseconds under 10⁹ s (e = −3, |m| < 10¹²).
    public func decimal(_ d: Double, mantissa m: Int, exponent e: Int) {
        guard e >= -3, e <= 5, e < 0 ? abs(m) < 1_000_000_000_000 : abs(m) < 2048 else { return double(d) }
        separate()
        ensure(32)
        var q = base + count
        Self.decimal(m, exponent: e, &q)
        count = q - base
        comma = true
    }

    public func string(_ s: String) {
        separate()
        quoted(s)
        comma = true
    }

    public func constant(_ s: StaticString) {
        // (No scan for characters to escape, no String: most lines have three of these.)
        plainText(UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    public func hex(_ bytes: [UInt8]) {
        separate()
        ensure(bytes.count * 2 + 2)
        // (Through a local pointer, the count stored once.)
        var q = base + count
        Self.put(0x22, &q)
        bytes.withUnsafeBufferPointer { u in
            for b in u {
                q[0] = Hex.digit(b >> 4)
                q[1] = Hex.digit(b & 0xF)
                q += 2
            }
        }
        Self.put(0x22, &q)
        count = q - base
        comma = true
    }

    public func plainText(_ utf8: UnsafeBufferPointer<UInt8>) {
        // (Room made once, the comma with it.)
        let n = utf8.count
        ensure(n + 3)
        var q = base + count
        if comma { Self.put(0x2C, &q) }
        q[0] = 0x22
        if let p = utf8.baseAddress { Self.copy(p, to: q + 1, n) }
        q[n + 1] = 0x22
        count = q + (n + 2) - base
        comma = true
    }

    public func timestamp(wallMicros: Int64, _ format: (Int64) -> String) {
        separate()
        ensure(48)
        put(0x22)
        var q = base + count
        iso8601(wallMicros, &q)
        count = q - base
        put(0x22)
        comma = true
    }

    /// An integer as JSON.int prints it (callers ensure 21 bytes).
    func signed(_ i: Int64) {
        if i < 0 { put(0x2D); digits(i == .min ? UInt64(1) << 63 : UInt64(-i)) } else { digits(UInt64(i)) }
    }

    // MARK: - Pieces (callers `ensure` room first, except `string` and `number`'s long form)

    /// A JSON string as ``JSONEscape`` writes it (the one owner of escaping).
    func quoted(_ s: String) {
        // (The string's own bytes where it has them, read in place: a mutable copy for withUTF8
        // cost a retain and a release for every string.)
        if s.utf8.withContiguousStorageIfAvailable({ quoted(utf8: $0) }) != nil { return }
        var s = s
        s.withUTF8 { quoted(utf8: $0) }
    }

    private func quoted(utf8 u: UnsafeBufferPointer<UInt8>) {
        // Most strings need no escape: copied as they are scanned, 8 bytes at a time, and
        // the count advanced only when none needed one.
        ensure(u.count + 2)
        let q = base + count
        q[0] = 0x22
        var i = 0
        var clean = true
        if let p = u.baseAddress {
            let from = UnsafeRawPointer(p), to = UnsafeMutableRawPointer(q + 1)
            while i + 8 <= u.count {
                let word = from.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                if JSONEscape.mayNeedEscape(word) { clean = false; break }
                to.storeBytes(of: word, toByteOffset: i, as: UInt64.self)
                i += 8
            }
        }
        while clean && i < u.count {
            let b = u[i]
            if JSONEscape.mayNeedEscape(b) { clean = false; break }
            q[1 + i] = b
            i += 1
        }
        if clean {
            q[1 + i] = 0x22
            count += u.count + 2
            return
        }
        ensure(u.count * JSONEscape.maxGrowth + 2)
        put(0x22)
        JSONEscape.escape(u) { put($0) }
        put(0x22)
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

    /// `m`·10ᵉ (−3 ≤ e ≤ 5, |m| < 2¹¹, an SFLOAT's mantissa) as number() prints the Double SFloat
    /// makes of it (m / 10⁻ᵉ correctly rounded, or m · 10ᵉ exactly): its shortest round-trip form
    /// is the decimal itself: a whole number (< 10⁹) as `n.0`, else trailing zeros dropped with at
    /// least one decimal.
    @inline(__always) static func decimal(_ m: Int, exponent e: Int, _ q: inout UnsafeMutablePointer<UInt8>) {
        if m < 0 { put(0x2D, &q) }
        var v = m.magnitude  // (unsigned: divisions by constants without the sign's corrections)
        guard e < 0 else {
            for _ in 0..<e { v *= 10 }
            digits(UInt64(v), &q)
            put(".0", &q)
            return
        }
        let d = -e
        let scale: UInt = d == 1 ? 10 : d == 2 ? 100 : 1000
        digits(UInt64(v / scale), &q)
        put(0x2E, &q)
        var frac = v % scale
        var n = d
        while n > 1 && frac % 10 == 0 { frac /= 10; n -= 1 }  // trailing zeros, keeping one digit
        var i = n
        while i > 0 { i -= 1; q[i] = UInt8(truncatingIfNeeded: 0x30 + frac % 10); frac /= 10 }
        q += n
    }

    /// ``decimal(_:exponent:_:)`` with exponent −3 (a count of milliseconds as seconds: a
    /// progress line's elapsed time), its three decimals written at once and the trailing zeros
    /// dropped by moving the end back (the loop of the general form was a fifth of the line).
    @inline(__always) static func milliseconds(_ m: Int, _ q: inout UnsafeMutablePointer<UInt8>) {
        if m < 0 { put(0x2D, &q) }
        let v = m.magnitude  // (unsigned: a division by a constant without the sign's corrections)
        digits(UInt64(v / 1000), &q)
        let f = v % 1000
        let d2 = f / 10 % 10, d3 = f % 10
        q[0] = 0x2E
        q[1] = UInt8(truncatingIfNeeded: 0x30 + f / 100)
        q[2] = UInt8(truncatingIfNeeded: 0x30 + d2)
        q[3] = UInt8(truncatingIfNeeded: 0x30 + d3)
        q += d3 != 0 ? 4 : d2 != 0 ? 3 : 2
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
        if v < 1000 {
            q[0] = UInt8(0x30 + v / 100); q[1] = UInt8(0x30 + v / 10 % 10); q[2] = UInt8(0x30 + v % 10); q += 3; return
        }
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

    /// EventTime.iso8601 (`2026-11-22T07:31:54.123Z`) at `q`, which has room for 48 bytes (at most 14 + 9 + 4 written); the text up to the seconds is computed
    /// once per second (a cuff notifies several times a second), the date once per day.
    @inline(__always) func iso8601(_ wallMicros: Int64, _ q: inout UnsafeMutablePointer<UInt8>) {
        // Floor division with no intermediate that can overflow (any Int64 will do).
        let rest = wallMicros % 1_000_000
        let secs = wallMicros / 1_000_000 - (rest < 0 ? 1 : 0)
        if secs != second { newSecond(secs) }
        let n = dayLength + 9
        if n <= 32 {
            // (Four word moves, not a call to memmove: the bytes past `n` are written over next.)
            let from = UnsafeRawPointer(prefix), to = UnsafeMutableRawPointer(q)
            to.storeBytes(of: from.load(as: UInt64.self), as: UInt64.self)
            to.storeBytes(of: from.load(fromByteOffset: 8, as: UInt64.self), toByteOffset: 8, as: UInt64.self)
            to.storeBytes(of: from.load(fromByteOffset: 16, as: UInt64.self), toByteOffset: 16, as: UInt64.self)
            to.storeBytes(of: from.load(fromByteOffset: 24, as: UInt64.self), toByteOffset: 24, as: UInt64.self)
        } else {
            q.update(from: prefix, count: n)
        }
        let ms = UInt64(bitPattern: rest < 0 ? rest + 1_000_000 : rest) / 1000  // (unsigned, as above)
        q[n] = UInt8(truncatingIfNeeded: 0x30 + ms / 100)
        q[n + 1] = UInt8(truncatingIfNeeded: 0x30 + ms / 10 % 10)
        q[n + 2] = UInt8(truncatingIfNeeded: 0x30 + ms % 10)
        q[n + 3] = 0x5A
        q += n + 4
    }

    /// Rewrites the cached `YYYY-MM-DDTHH:MM:SS.` for another second (and the date for another day).
    func newSecond(_ secs: Int64) {
        // The next second, its last digit not a 9 (nine times in ten): that digit goes up by one.
        // (`second` starts as .min, whose successor no timestamp has.)
        let last = prefix + dayLength + 7
        if secs &- second == 1, last.pointee < 0x39 {
            second = secs
            last.pointee += 1
            return
        }
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
        var q = base + count
        Self.put(s, &q)
        count = q - base
    }

    /// Copies `n` bytes. 4 to 16 of them (most keys and constants) with two word moves that may
    /// overlap, each within both ranges, instead of a call to memmove; others with memmove.
    @inline(__always) static func copy(_ from: UnsafePointer<UInt8>, to: UnsafeMutablePointer<UInt8>, _ n: Int) {
        let source = UnsafeRawPointer(from), target = UnsafeMutableRawPointer(to)
        if n >= 8 && n <= 16 {
            let head = source.loadUnaligned(as: UInt64.self),
                tail = source.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
            target.storeBytes(of: head, as: UInt64.self)
            target.storeBytes(of: tail, toByteOffset: n - 8, as: UInt64.self)
        } else if n >= 4 && n < 8 {
            let head = source.loadUnaligned(as: UInt32.self),
                tail = source.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)
            target.storeBytes(of: head, as: UInt32.self)
            target.storeBytes(of: tail, toByteOffset: n - 4, as: UInt32.self)
        } else {
            to.update(from: from, count: n)
        }
    }

    // Through a local pointer (the caller ensured room and stores the count after).
    @inline(__always) static func put(_ b: UInt8, _ q: inout UnsafeMutablePointer<UInt8>) {
        q.pointee = b
        q += 1
    }

    @inline(__always) static func put(_ s: StaticString, _ q: inout UnsafeMutablePointer<UInt8>) {
        // A literal's length is a constant here: the copy unrolls into word moves (the last one
        // overlapping), with no call to memmove (about 15 instructions a progress line).
        let n = s.utf8CodeUnitCount
        if n < 4 {
            for i in 0..<n { q[i] = s.utf8Start[i] }
        } else if n < 8 {
            copy(s.utf8Start, to: q, n)
        } else {
            let from = UnsafeRawPointer(s.utf8Start), to = UnsafeMutableRawPointer(q)
            var i = 0
            while i + 8 < n {
                to.storeBytes(
                    of: from.loadUnaligned(fromByteOffset: i, as: UInt64.self), toByteOffset: i, as: UInt64.self)
                i += 8
            }
            to.storeBytes(
                of: from.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self), toByteOffset: n - 8, as: UInt64.self)
        }
        q += n
    }
}
