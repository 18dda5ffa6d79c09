// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import Synchronization
import Transport

#if canImport(Glibc)
    import Glibc
    import StoreFormat
#endif

/// Pressures for the clinical formats (FHIR, Open mHealth), which take mmHg only.
public enum ClinicalValue {
    /// The value in mmHg, or nil for a special SFLOAT. kPa is converted with
    /// ``PressureUnit/mmHgPerKPa`` (7.500 617; output-formats.md rounds it to 7.50062) and
    /// rounded to one decimal; mmHg values pass through unchanged.
    public static func mmHg(_ v: SFloat, unit: PressureUnit) -> Double? {
        guard let d = v.doubleValue else { return nil }
        switch unit {
        case .mmHg: return d
        case .kPa: return (d * PressureUnit.mmHgPerKPa * 10).rounded(.toNearestOrAwayFromZero) / 10
        }
    }

    /// HL7 data-absent-reason code for a special SFLOAT (nil for a number): NaN → `not-a-number`,
    /// NRes → `error`, +INF → `positive-infinity`, −INF → `negative-infinity`, reserved → `error`.
    public static func dataAbsentReason(_ v: SFloat) -> String? {
        switch v.value {
        case .finite: nil
        case .nan: "not-a-number"
        case .nres: "error"
        case .positiveInfinity: "positive-infinity"
        case .negativeInfinity: "negative-infinity"
        case .reserved: "error"
        }
    }
}

/// The host's offset from UTC, used to give a zone-less device time an explicit offset.
///
/// The device's Date Time has no zone; output-formats.md C.0/3 says to assume the host's zone at
/// ingest. ``system`` reads the wall time in the host's zone (`TZ`, `/etc/localtime`) as it is
/// when the record is ingested, so a reading taken in summer and uploaded from the cuff's memory in
/// winter gets its summer offset; ``systemAtReception`` is the plainer rule (the offset at
/// `received_at`). The offset is in seconds east of UTC.
public struct UTCOffsetPolicy: Sendable {
    public let offsetSeconds: @Sendable (MeasurementRecord) -> Int

    public init(_ offsetSeconds: @escaping @Sendable (MeasurementRecord) -> Int) { self.offsetSeconds = offsetSeconds }

    /// The host zone's offset at the device's wall time (DST included, `mktime` with
    /// `tm_isdst = -1`), or at `received_at` when the record has no zone-less device time.
    /// A wall time the zone shows twice (the hour repeated when DST ends) takes the offset that
    /// makes it the latest instant not after `received_at` (a reading is taken before it arrives).
    public static let system = UTCOffsetPolicy { m in
        let received = m.receivedAt.wallMicros / 1_000_000
        if let ts = m.timestamp, let off = hostUTCOffset(atLocalDateTime: ts, receivedAt: received) { return off }
        return hostUTCOffset(atUnixSeconds: received)
    }

    /// The host zone's offset at `received_at`.
    public static let systemAtReception = UTCOffsetPolicy { m in
        hostUTCOffset(atUnixSeconds: m.receivedAt.wallMicros / 1_000_000)
    }

    /// Always `seconds` east of UTC.
    public static func fixed(_ seconds: Int) -> UTCOffsetPolicy { UTCOffsetPolicy { _ in seconds } }

    /// Offsets recorded at ingest, by `dedupKey` (see ``StoredMeasurement/hostUTCOffsetSeconds``),
    /// falling back to `fallback` for records not in `recorded`.
    public static func recorded(_ recorded: [String: Int], fallback: UTCOffsetPolicy = .system) -> UTCOffsetPolicy {
        UTCOffsetPolicy { m in recorded[m.dedupKey] ?? fallback.offsetSeconds(m) }
    }

    /// Reads `TZ` / `/etc/localtime` once (localtime_r need not).
    private static let tzLoaded: Bool = {
        tzset()
        return true
    }()

    /// The host zone's offset for the local wall time `YYYY-MM-DDTHH:MM:SS`, or nil when `s` is not one.
    ///
    /// A wall time the zone shows twice (the hour repeated when DST ends) has two offsets: with
    /// `receivedAt` (Unix seconds), the one that makes it the latest instant not after it, or, when
    /// both are after it (a cuff clock running ahead), the earlier; without, the one `mktime` picks.
    public static func hostUTCOffset(atLocalDateTime s: String, receivedAt: Int64? = nil) -> Int? {
        guard EffectiveTime.isLocalDateTime(s) else { return nil }
        let u = Array(s.utf8)
        func n(_ r: Range<Int>) -> Int32 { r.reduce(0) { $0 * 10 + Int32(u[$1] - UInt8(ascii: "0")) } }
        _ = tzLoaded
        var wall = tm()
        wall.tm_year = n(0..<4) - 1900
        wall.tm_mon = n(5..<7) - 1
        wall.tm_mday = n(8..<10)
        wall.tm_hour = n(11..<13)
        wall.tm_min = n(14..<16)
        wall.tm_sec = n(17..<19)
        var tmv = wall
        tmv.tm_isdst = -1
        let t = mktime(&tmv)
        guard t != -1 else { return nil }
        let picked = (instant: Int64(t), offset: Int(tmv.tm_gmtoff))
        guard let receivedAt else { return picked.offset }
        // The other reading of the same wall time: the offset an hour's DST step away, kept when
        // the zone shows that wall time at that offset too.
        var candidates = [picked]
        for isDST: Int32 in [0, 1] {
            var other = wall
            other.tm_isdst = isDST
            let o = mktime(&other)
            guard o != -1, Int64(o) != picked.instant, let back = Sys.localTime(Int64(o)),
                back.tm_year == wall.tm_year, back.tm_mon == wall.tm_mon, back.tm_mday == wall.tm_mday,
                back.tm_hour == wall.tm_hour, back.tm_min == wall.tm_min, back.tm_sec == wall.tm_sec
            else { continue }
            candidates.append((Int64(o), Int(back.tm_gmtoff)))
        }
        guard candidates.count > 1 else { return picked.offset }
        if let latest = candidates.filter({ $0.instant <= receivedAt }).max(by: { $0.instant < $1.instant }) {
            return latest.offset
        }
        return candidates.min { $0.instant < $1.instant }!.offset
    }

    /// The host zone's offset from UTC at `unixSeconds`.
    public static func hostUTCOffset(atUnixSeconds s: Int64) -> Int {
        _ = tzLoaded
        guard let tmv = Sys.localTime(s) else { return 0 }
        return Int(tmv.tm_gmtoff)
    }
}

/// Which clock an effective time comes from (the `time_basis` of output-formats.md C.5).
public enum TimeBasis: String, Sendable, Hashable {
    /// The cuff's Date Time, with the host's offset at ingest attached.
    case deviceLocalAssumedHostOffset = "device-local-assumed-host-offset"
    /// A BPS 1.1 Time Stamp, which is UTC.
    case utcEnhanced = "utc-enhanced"
    /// No usable device time: when the host received it.
    case hostReceive = "host-receive"
}

/// When a measurement was taken, as RFC 3339 with an explicit offset.
public struct EffectiveTime: Sendable, Hashable {
    public var rfc3339: String
    public var basis: TimeBasis

    public init(rfc3339: String, basis: TimeBasis) {
        self.rfc3339 = rfc3339
        self.basis = basis
    }

    /// The device time when the record has one (`timestamp`, with the host offset attached when it
    /// has no zone), else `received_at` (UTC).
    public static func of(_ m: MeasurementRecord, offset: UTCOffsetPolicy) -> EffectiveTime {
        if let ts = m.timestamp, isLocalDateTime(ts.hasSuffix("Z") ? String(ts.dropLast()) : ts) {
            if ts.hasSuffix("Z") { return EffectiveTime(rfc3339: ts, basis: .utcEnhanced) }
            return EffectiveTime(
                rfc3339: ts + formatOffset(offset.offsetSeconds(m)), basis: .deviceLocalAssumedHostOffset)
        }
        return EffectiveTime(rfc3339: m.receivedAt.iso8601, basis: .hostReceive)
    }

    /// `+02:00`, `-05:30`, `+00:00`.
    public static func formatOffset(_ seconds: Int) -> String {
        let sign = seconds < 0 ? "-" : "+"
        let minutes = abs(seconds) / 60
        let h = String(minutes / 60), m = String(minutes % 60)
        return sign + String(repeating: "0", count: max(0, 2 - h.count)) + h + ":"
            + String(repeating: "0", count: 2 - m.count) + m
    }

    /// `YYYY-MM-DDTHH:MM:SS`, digits where digits belong.
    static func isLocalDateTime(_ s: String) -> Bool {
        let u = Array(s.utf8)
        guard u.count == 19 else { return false }
        for (i, c) in u.enumerated() {
            switch i {
            case 4, 7: if c != UInt8(ascii: "-") { return false }
            case 10: if c != UInt8(ascii: "T") { return false }
            case 13, 16: if c != UInt8(ascii: ":") { return false }
            default: if !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) { return false }
            }
        }
        // The same calendar rule as the codec's (a store written before it knew leap years may
        // hold 2023-02-29; such a time is not a time FHIR or Open mHealth accept).
        func number(_ r: Range<Int>) -> Int { u[r].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) } }
        let dt = DateTime(
            year: UInt16(number(0..<4)), month: UInt8(number(5..<7)), day: UInt8(number(8..<10)),
            hours: UInt8(number(11..<13)), minutes: UInt8(number(14..<16)), seconds: UInt8(number(17..<19)))
        return dt.isDateKnown && dt.isValid
    }
}

/// SplitMix64 for reproducible ids: the one generator the project has (`CuffCore.SeededRandom`).
public typealias SplitMix64 = SeededRandom

/// Makes RFC 9562 version-4 UUIDs from a generator: the system's, or a seeded one for tests.
public final class UUIDGenerator: Sendable {
    private let next: Mutex<() -> UInt64>

    /// Uses `SystemRandomNumberGenerator` (getrandom).
    public static func system() -> UUIDGenerator {
        UUIDGenerator {
            var g = SystemRandomNumberGenerator(); return g.next()
        }
    }

    /// Reproducible: the same seed gives the same ids.
    public static func seeded(_ seed: UInt64) -> UUIDGenerator {
        var g = SplitMix64(seed: seed)
        return UUIDGenerator { g.next() }
    }

    private init(_ next: sending @escaping () -> UInt64) { self.next = Mutex(next) }

    /// `xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx`, lowercase.
    public func make() -> String {
        let (a, b) = next.withLock { n in (n(), n()) }
        var bytes =
            (0..<8).map { UInt8(truncatingIfNeeded: a >> (8 * $0)) }
            + (0..<8).map { UInt8(truncatingIfNeeded: b >> (8 * $0)) }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        let hex = Hex.encode(bytes).lowercased()
        let u = Array(hex)
        return String(u[0..<8]) + "-" + String(u[8..<12]) + "-" + String(u[12..<16]) + "-" + String(u[16..<20]) + "-"
            + String(u[20..<32])
    }
}

extension DeviceInfo {
    /// `Omron M7 (serial 123, AA:BB:CC:DD:EE:FF)`; just the address when nothing else is known.
    var humanName: String {
        let label = [manufacturer, model].compactMap { $0 }.joined(separator: " ")
        let named = label.isEmpty ? (name ?? "") : label
        var details: [String] = []
        if let serial { details.append("serial " + serial) }
        details.append(address)
        return named.isEmpty ? details.joined(separator: ", ") : named + " (" + details.joined(separator: ", ") + ")"
    }
}
