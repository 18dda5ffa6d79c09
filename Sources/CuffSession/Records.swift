// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore

/// When an event happened: a monotonic instant for timeouts, and wall-clock time for records.
///
/// Live sessions take both from the system; replay takes both from the capture's timestamps.
public struct EventTime: Sendable, Hashable {
    public var monotonic: Timestamp
    /// Microseconds since 1970-01-01T00:00:00Z.
    public var wallMicros: Int64

    public init(monotonic: Timestamp, wallMicros: Int64) {
        self.monotonic = monotonic
        self.wallMicros = wallMicros
    }

    /// `2026-11-22T07:31:54.123Z`.
    public var iso8601: String { EventTime.iso8601(wallMicros: wallMicros) }

    public static func iso8601(wallMicros: Int64) -> String {
        // Rounded towards −∞ without an intermediate that can overflow (any Int64 will do).
        let rest = wallMicros % 1_000_000
        let secs = wallMicros / 1_000_000 - (rest < 0 ? 1 : 0)
        let ms = Int((rest < 0 ? rest + 1_000_000 : rest) / 1000)
        var text = DateTime(unixSeconds: secs).description
        text.append(contentsOf: ".")
        text.append(Character(Unicode.Scalar(UInt8(0x30 + ms / 100))))
        text.append(Character(Unicode.Scalar(UInt8(0x30 + ms / 10 % 10))))
        text.append(Character(Unicode.Scalar(UInt8(0x30 + ms % 10))))
        text.append("Z")
        return text
    }
}

/// What the session knows about the cuff.
///
/// A value type whose fields live in one shared box, copied when a copy is changed: a device
/// rides in every session and measurement record, and those are copied several times between
/// the session and the sinks (one retain each instead of one per string).
public struct DeviceInfo: Sendable, Hashable {
    @usableFromInline final class Storage: @unchecked Sendable {
        // (Unchecked, and without the dynamic checks of exclusive access: changed only through
        // a DeviceInfo that holds the one reference to it, never while it is read.)
        @exclusivity(unchecked) @usableFromInline var address: String
        @exclusivity(unchecked) @usableFromInline var name: String?
        @exclusivity(unchecked) @usableFromInline var manufacturer: String?
        @exclusivity(unchecked) @usableFromInline var model: String?
        @exclusivity(unchecked) @usableFromInline var serial: String?
        @exclusivity(unchecked) @usableFromInline var firmware: String?
        @exclusivity(unchecked) @usableFromInline var features: BloodPressureFeature?

        @usableFromInline init(
            address: String, name: String?, manufacturer: String?, model: String?, serial: String?,
            firmware: String?, features: BloodPressureFeature?
        ) {
            self.address = address
            self.name = name
            self.manufacturer = manufacturer
            self.model = model
            self.serial = serial
            self.firmware = firmware
            self.features = features
        }

        @usableFromInline func copy() -> Storage {
            Storage(
                address: address, name: name, manufacturer: manufacturer, model: model, serial: serial,
                firmware: firmware, features: features)
        }
    }

    @usableFromInline var storage: Storage

    /// The box, made this value's own before a change.
    @inlinable var unique: Storage {
        mutating get {
            if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
            return storage
        }
    }

    /// Where it is: `AA:BB:CC:DD:EE:FF`, `unix:/tmp/cuff.sock`, `simulated`.
    @inlinable public var address: String {
        get { storage.address }
        set { unique.address = newValue }
    }
    @inlinable public var name: String? {
        get { storage.name }
        set { unique.name = newValue }
    }
    @inlinable public var manufacturer: String? {
        get { storage.manufacturer }
        set { unique.manufacturer = newValue }
    }
    @inlinable public var model: String? {
        get { storage.model }
        set { unique.model = newValue }
    }
    /// The Serial Number the cuff gave; nil when it gave none, or only blanks or NULs (cheap cuffs
    /// send such a serial: taken as one, it would make every such cuff one device).
    @inlinable public var serial: String? {
        get { storage.serial }
        set { unique.serial = Self.meaningful(serial: newValue) }
    }
    /// `serial`, or nil when it holds nothing but spaces, control characters or NULs.
    @inlinable public static func meaningful(serial: String?) -> String? {
        guard let serial, serial.unicodeScalars.contains(where: { $0.value > 0x20 && $0.value != 0x7F }) else {
            return nil
        }
        return serial
    }
    @inlinable public var firmware: String? {
        get { storage.firmware }
        set { unique.firmware = newValue }
    }
    /// Blood Pressure Feature, once read.
    @inlinable public var features: BloodPressureFeature? {
        get { storage.features }
        set { unique.features = newValue }
    }

    public init(
        address: String, name: String? = nil, manufacturer: String? = nil, model: String? = nil, serial: String? = nil,
        firmware: String? = nil, features: BloodPressureFeature? = nil
    ) {
        storage = Storage(
            address: address, name: name, manufacturer: manufacturer, model: model,
            serial: Self.meaningful(serial: serial), firmware: firmware, features: features)
    }

    public static func == (a: DeviceInfo, b: DeviceInfo) -> Bool {
        if a.storage === b.storage { return true }
        let x = a.storage, y = b.storage
        return x.address == y.address && x.name == y.name && x.manufacturer == y.manufacturer && x.model == y.model
            && x.serial == y.serial && x.firmware == y.firmware && x.features == y.features
    }

    public func hash(into h: inout Hasher) {
        let x = storage
        h.combine(x.address)
        h.combine(x.name)
        h.combine(x.manufacturer)
        h.combine(x.model)
        h.combine(x.serial)
        h.combine(x.firmware)
        h.combine(x.features)
    }

    public var json: JSON { JSON.build { write(to: &$0) } }

    @inlinable public func write<W: JSONWriter>(to w: inout W) {
        w.beginObject()
        w.key("address"); w.string(address)
        w.key("name"); w.optional(name)
        w.key("manufacturer"); w.optional(manufacturer)
        w.key("model"); w.optional(model)
        w.key("serial"); w.optional(serial)
        w.key("firmware"); w.optional(firmware)
        w.endObject()
    }

    /// A stable identity for deduplication: ``distinctSerial`` when known, else the address.
    public var identity: String { distinctSerial.map { "serial:" + $0 } ?? "address:" + address }

    /// The serial number when it tells this cuff from others: nil without one, and for the
    /// placeholders cheap cuffs send in Device Information alike (``isPlaceholder(serial:)``).
    /// Two cuffs sharing one would be one device to the store and share its sequence-number
    /// keys, so a record of the second would be dropped as the first's: they are known by their
    /// address instead. (`serial` itself stays what the cuff sent.)
    public var distinctSerial: String? {
        guard let serial, !Self.isPlaceholder(serial: serial) else { return nil }
        return serial
    }

    /// A serial number that many cuffs send alike: blank, one character repeated ("0000000000",
    /// "FFFFFFFF"), a counting run ("123456789", "0123456789"), or a word for none ("N/A",
    /// "none", "unknown", "serial number" …), ignoring case, spaces and NULs around it.
    public static func isPlaceholder(serial: String) -> Bool {
        // (One pass, no array: the dedup key asks this for every result. The words are at most 12
        // bytes, so the lowercased text is a small string, kept inline.)
        var first: UInt8?
        var allSame = true
        var lower = ""
        var count = 0
        for b in serial.utf8 where b > 0x20 && b != 0x7F {
            if let f = first { allSame = allSame && b == f } else { first = b }
            count += 1
            if count <= 12 { lower.unicodeScalars.append(Unicode.Scalar((0x41...0x5A).contains(b) ? b | 0x20 : b)) }
        }
        guard first != nil, !allSame else { return true }
        return count <= 12 && Self.placeholderSerials.contains(lower)
    }

    /// (Lowercase, without spaces.)
    static let placeholderSerials: Set<String> = [
        "n/a", "na", "none", "null", "nil", "unknown", "serial", "serialnumber", "sn", "s/n", "default", "-",
        "123456", "1234567", "12345678", "123456789", "1234567890", "0123456789", "01234567", "012345678",
        "abcdef", "abcdefgh", "xxxx",
    ]
}

/// One blood-pressure result: the decoded value, where it came from, when it arrived.
public struct MeasurementRecord: Sendable, Hashable {
    /// 0x2A35, 0x2B34, or 0x2B36 (a stored record carrying 0x2B34); another protocol's own
    /// source (``RecordCharacteristic/named(_:)``).
    public var characteristic: RecordCharacteristic
    /// The attribute value as received (for 0x2B36: the reassembled record body's recorded value).
    public var raw: [UInt8]
    public var unit: PressureUnit
    public var systolic: SFloat
    public var diastolic: SFloat
    public var meanArterialPressure: SFloat
    public var pulseRate: SFloat?
    /// ISO 8601; device-local without offset for Date Time, UTC (`Z`) for BPS 1.1 time stamps.
    public var timestamp: String?
    public var userID: UInt8?
    public var status: MeasurementStatus?
    public var warnings: [DecodeWarning]
    public var device: DeviceInfo
    public var receivedAt: EventTime
    /// Sent from the cuff's memory (a burst after subscription, or a RACP report), not measured now.
    public var stored: Bool
    /// BPS 1.1 record sequence number, when known.
    public var sequenceNumber: UInt16?
    /// The codec's JSON object for the value (`cuff decode`'s keys), built when first asked for
    /// (sinks do, off the session's thread in a replay).
    public var decoded: JSON {
        get {
            switch decodedSource {
            case let .json(j): j
            case .bpm, .enhanced: JSON.build { writeDecoded(to: &$0) }
            }
        }
        set { decodedSource = .json(newValue) }
    }

    /// The cuff does not measure the MAP (a quirk's placeholder, or a protocol without one): the
    /// decoded object says `null`, not `"NaN"` (unavailable this time).
    public var meanArterialPressureAbsent: Bool {
        switch decodedSource {
        case let .bpm(v): v.meanArterialPressureAbsent
        case .enhanced: false
        case let .json(j): j["mean_arterial_pressure"] == .null
        }
    }

    /// ``decoded`` written to `w` (the same object, without building it as a ``JSON`` value).
    @inlinable public func writeDecodedObject<W: JSONWriter>(to w: inout W) { writeDecoded(to: &w) }

    /// ``decoded`` written to `w`, with `more` writing keys after the codec's own. With
    /// `typeAsMeasurement`, the first `type` key says "measurement" whatever the object holds (the
    /// codecs' results say so already; a record read back as a tree may not).
    @inlinable func writeDecoded<W: JSONWriter>(
        to w: inout W, typeAsMeasurement: Bool = false, more: (inout W) -> Void = { _ in }
    ) {
        let raw = self.raw  // (capturing `self` in the closures below copied the whole record)
        switch decodedSource {
        case let .bpm(v):
            v.write(as: .bloodPressureMeasurement, warnings: warnings, to: &w, raw: { $0.hex(raw) }, more: more)
        case let .enhanced(v): v.write(warnings: warnings, to: &w, raw: { $0.hex(raw) }, more: more)
        case let .json(j):
            guard case let .object(pairs) = j else { return w.value(j) }
            var typed = !typeAsMeasurement
            w.beginObject()
            for (k, v) in pairs {
                w.dynamicKey(k)
                if !typed && k == "type" {
                    typed = true
                    w.constant("measurement")
                } else {
                    w.value(v)
                }
            }
            more(&w)
            w.endObject()
        }
    }

    /// What ``decoded`` is built from.
    @usableFromInline enum DecodedSource: Sendable {
        case json(JSON)
        case bpm(BloodPressureMeasurement)
        case enhanced(EnhancedBloodPressureMeasurement)
    }
    @usableFromInline var decodedSource: DecodedSource

    /// The codec's value ``decoded`` is written from, for a record the codec made (nil for one
    /// made from a JSON object, such as a record read back from a store).
    public enum CodecValue: Sendable {
        case bpm(BloodPressureMeasurement)
        case enhanced(EnhancedBloodPressureMeasurement)
    }
    public var codecValue: CodecValue? {
        switch decodedSource {
        case .json: nil
        case let .bpm(v): .bpm(v)
        case let .enhanced(v): .enhanced(v)
        }
    }
    /// The device's own time fields as sent (also when the date is partly unknown), for deduplication.
    public var deviceTime: String?

    public init(
        characteristic: RecordCharacteristic, raw: [UInt8], unit: PressureUnit, systolic: SFloat, diastolic: SFloat,
        meanArterialPressure: SFloat, pulseRate: SFloat?, timestamp: String?, userID: UInt8?,
        status: MeasurementStatus?,
        warnings: [DecodeWarning], device: DeviceInfo, receivedAt: EventTime, stored: Bool, sequenceNumber: UInt16?,
        decoded: JSON
    ) {
        self.init(
            characteristic: characteristic, raw: raw, unit: unit, systolic: systolic, diastolic: diastolic,
            meanArterialPressure: meanArterialPressure, pulseRate: pulseRate, timestamp: timestamp, userID: userID,
            status: status, warnings: warnings, device: device, receivedAt: receivedAt, stored: stored,
            sequenceNumber: sequenceNumber, decodedSource: .json(decoded), deviceTime: timestamp)
    }

    /// A record made whole from its codec's value (``from(bpm:warnings:raw:device:at:stored:)``,
    /// ``from(enhanced:warnings:raw:device:at:stored:sequenceNumber:)``): no field set afterwards
    /// (a record is large, and setting one on a copy retains each of its references).
    init(
        characteristic: RecordCharacteristic, raw: [UInt8], unit: PressureUnit, systolic: SFloat, diastolic: SFloat,
        meanArterialPressure: SFloat, pulseRate: SFloat?, timestamp: String?, userID: UInt8?,
        status: MeasurementStatus?,
        warnings: [DecodeWarning], device: DeviceInfo, receivedAt: EventTime, stored: Bool, sequenceNumber: UInt16?,
        decodedSource: DecodedSource, deviceTime: String?
    ) {
        self.characteristic = characteristic
        self.raw = raw
        self.unit = unit
        self.systolic = systolic
        self.diastolic = diastolic
        self.meanArterialPressure = meanArterialPressure
        self.pulseRate = pulseRate
        self.timestamp = timestamp
        self.userID = userID
        self.status = status
        self.warnings = warnings
        self.device = device
        self.receivedAt = receivedAt
        self.stored = stored
        self.sequenceNumber = sequenceNumber
        self.decodedSource = decodedSource
        self.deviceTime = deviceTime
    }

    public static func == (a: MeasurementRecord, b: MeasurementRecord) -> Bool {
        a.characteristic == b.characteristic && a.raw == b.raw && a.device == b.device && a.receivedAt == b.receivedAt
            && a.stored == b.stored && a.sequenceNumber == b.sequenceNumber
    }

    public func hash(into h: inout Hasher) {
        h.combine(raw)
        h.combine(receivedAt)
    }

    /// True when systolic and diastolic are numbers (not an error frame).
    public var hasValues: Bool { systolic.doubleValue != nil && diastolic.doubleValue != nil }

    /// The keys this record would have without its sequence number, for a record that has one
    /// and a time (empty otherwise): a stored record that a session received live before, with no
    /// sequence number (a BPS 1.1 cuff sends a measurement live, then the same one as a record of
    /// its memory), is known by one of them. Only the keys of records without a sequence number are ever of
    /// that form, so two stored records are never taken for one.
    ///
    /// A 0x2B34 record has two such keys: by its time stamp (as a live 0x2B34 is keyed), and by
    /// its user-facing time, the cuff's local time (as a live 0x2A35 is keyed).
    public var unsequencedDedupKeys: [String] {
        guard sequenceNumber != nil, deviceTime != nil || timestamp != nil else { return [] }
        var r = self
        r.sequenceNumber = nil
        var keys = [r.dedupKey]
        if case let .enhanced(v) = decodedSource, let local = v.userFacingTimeISO8601,
            local != (deviceTime ?? timestamp)
        {
            r.deviceTime = local
            keys.append(r.dedupKey)
        }
        return keys
    }

    /// True for a stored record that `known` already knows by one of its
    /// ``unsequencedDedupKeys``: the same reading, received live before (the one check every
    /// place that keeps records makes, against its own sets of keys).
    public func wasKeptLive(_ known: (String) -> Bool) -> Bool {
        sequenceNumber != nil && (unsequencedDedupKeys.contains(where: known) || legacyDedupKey.map(known) == true)
    }

    /// A stored record's key as cuff wrote it before its time and values were part of it
    /// (`identity|user:U|seq:N`): a store kept then knows its records by it, so a record read
    /// again (`--keep-unread`, a re-read memory) is not kept a second time after the upgrade.
    public var legacyDedupKey: String? {
        guard let sequenceNumber else { return nil }
        return (device.distinctSerial.map { "serial:" + $0 } ?? "address:" + device.address) + "|user:"
            + (userID.map { String($0) } ?? "-") + "|seq:" + String(sequenceNumber)
    }

    /// Deduplication key: device + user + the sequence number when known + timestamp + values.
    public var dedupKey: String {
        // `identity|user:U|seq:N|ts:T|` (a stored record; `|ts:T` only when it has a time) or
        // `identity|user:U|ts:T|` (a live one; T its arrival when the cuff gave no time), then
        // the four SFLOAT words as little-endian hex. A stored record's time and values are part
        // of it (probe W: a cuff that numbered again from 0 sent new readings under numbers the
        // store knew, and every one was skipped as "already received", for good). (UTF-8 bytes
        // written straight into the string's own storage: a session computes one per result,
        // and string appends cost several times more.)
        let serial = device.distinctSerial
        let identity = serial ?? device.address
        let time = deviceTime ?? timestamp
        let received = sequenceNumber == nil && time == nil ? receivedAt.iso8601 : nil
        let capacity =
            8 + identity.utf8.count + 6 + 3 + (sequenceNumber != nil ? 5 + 5 : 0)
            + 4 + (time?.utf8.count ?? 9 + (received?.utf8.count ?? 0)) + 1 + 16
        return String(unsafeUninitializedCapacity: capacity) { b in
            // (Through a local pointer and static helpers: a variable captured by nested
            // functions is checked for exclusive access at every use.)
            var q = b.baseAddress!
            Self.put(serial != nil ? "serial:" : "address:", &q)
            Self.put(identity, &q)
            Self.put("|user:", &q)
            if let userID { Self.putDecimal(Int(userID), &q) } else { Self.put("-", &q) }
            if let sequenceNumber {
                Self.put("|seq:", &q)
                Self.putDecimal(Int(sequenceNumber), &q)
                if let time {
                    Self.put("|ts:", &q)
                    Self.put(time, &q)
                }
            } else {
                // Without a time stamp two equal readings cannot be told apart from one sent twice;
                // keeping both (keyed by arrival) loses nothing, merging them could.
                Self.put("|ts:", &q)
                if let time {
                    Self.put(time, &q)
                } else {
                    Self.put("received ", &q)
                    Self.put(received ?? "", &q)
                }
            }
            Self.put("|", &q)
            for w in [systolic.rawValue, diastolic.rawValue, meanArterialPressure.rawValue, pulseRate?.rawValue ?? 0] {
                // Each word little-endian, each byte lowercase hex.
                q[0] = Hex.digit(UInt8(w & 0xF0) >> 4)
                q[1] = Hex.digit(UInt8(w & 0x0F))
                q[2] = Hex.digit(UInt8(w >> 12))
                q[3] = Hex.digit(UInt8(w >> 8 & 0x0F))
                q += 4
            }
            return q - b.baseAddress!
        }
    }

    @inline(__always) static func put(_ s: StaticString, _ q: inout UnsafeMutablePointer<UInt8>) {
        q.update(from: s.utf8Start, count: s.utf8CodeUnitCount)
        q += s.utf8CodeUnitCount
    }

    @inline(__always) static func put(_ s: String, _ q: inout UnsafeMutablePointer<UInt8>) {
        var s = s  // (withUTF8 makes it native: no copy when it already is)
        let n = s.withUTF8 { u in
            if let p = u.baseAddress { q.update(from: p, count: u.count) }
            return u.count
        }
        q += n
    }

    /// The decimal digits of `v` (≥ 0), as `String(v)` gives them.
    static func putDecimal(_ v: Int, _ q: inout UnsafeMutablePointer<UInt8>) {
        if v >= 10 { putDecimal(v / 10, &q) }
        q.pointee = UInt8(0x30 + v % 10)
        q += 1
    }

    /// The NDJSON `measurement` object: the codec's keys, then `device`, `received_at`, `stored`, `sequence_number`.
    public var json: JSON { JSON.build { write(to: &$0) } }

    /// ``json`` written to `w`; with `typeAsMeasurement`, as a `measurement` line of NDJSON (see
    /// ``writeDecoded(to:typeAsMeasurement:more:)``).
    @inlinable public func write<W: JSONWriter>(to w: inout W, typeAsMeasurement: Bool = false) {
        write(to: &w, typeAsMeasurement: typeAsMeasurement) { w, d in d.write(to: &w) }
    }

    /// ``write(to:typeAsMeasurement:)`` with the `device` object written by `writeDevice` (a
    /// writer that keeps the text of the devices it wrote copies it; the same object).
    @inlinable public func write<W: JSONWriter>(
        to w: inout W, typeAsMeasurement: Bool, device writeDevice: (inout W, DeviceInfo) -> Void
    ) {
        // (The fields the closure needs, taken first: capturing `self` copied the whole record.)
        let device = self.device, receivedAt = self.receivedAt, stored = self.stored
        let sequenceNumber = self.sequenceNumber
        writeDecoded(to: &w, typeAsMeasurement: typeAsMeasurement) { w in
            w.key("device"); writeDevice(&w, device)
            w.key("received_at"); w.timestamp(wallMicros: receivedAt.wallMicros, EventTime.iso8601(wallMicros:))
            w.key("stored"); w.bool(stored)
            w.key("sequence_number"); if let sequenceNumber { w.int(Int64(sequenceNumber)) } else { w.null() }
        }
    }

    /// Builds a record from a 0x2A35 value.
    public static func from(
        bpm value: BloodPressureMeasurement, warnings: [DecodeWarning], raw: [UInt8], device: DeviceInfo, at: EventTime,
        stored: Bool
    ) -> MeasurementRecord {
        let iso = value.timestamp?.iso8601  // (when there is one, it is also the description)
        return MeasurementRecord(
            characteristic: .bloodPressureMeasurement, raw: raw, unit: value.unit, systolic: value.systolic,
            diastolic: value.diastolic, meanArterialPressure: value.meanArterialPressure, pulseRate: value.pulseRate,
            timestamp: iso, userID: value.userID, status: value.status, warnings: warnings, device: device,
            receivedAt: at, stored: stored, sequenceNumber: nil, decodedSource: .bpm(value),
            deviceTime: iso ?? value.timestamp?.description)
    }

    /// Builds a record from a 0x2B34 value (directly, or recorded in a 0x2B36 record).
    public static func from(
        enhanced value: EnhancedBloodPressureMeasurement, warnings: [DecodeWarning], raw: [UInt8], device: DeviceInfo,
        at: EventTime, stored: Bool, sequenceNumber: UInt16?
    ) -> MeasurementRecord? {
        guard case let .measurement(s, d, m) = value.kind else { return nil }
        let timestamp = value.timestampISO8601 ?? value.userFacingTimeISO8601
        return MeasurementRecord(
            characteristic: sequenceNumber == nil ? .enhancedBloodPressureMeasurement : .bloodPressureRecord, raw: raw,
            unit: value.unit, systolic: s, diastolic: d, meanArterialPressure: m, pulseRate: value.pulseRate,
            timestamp: timestamp, userID: value.userID, status: value.status,
            warnings: warnings, device: device, receivedAt: at, stored: stored, sequenceNumber: sequenceNumber,
            decodedSource: .enhanced(value), deviceTime: timestamp)
    }
}

/// Phase of a measurement as the cuff pressure shows it.
public enum MeasurementPhase: String, Sendable, Hashable, CaseIterable {
    case inflating
    case deflating

    /// ``rawValue`` as a constant (for ``JSONWriter/constant(_:)``).
    public var name: StaticString {
        switch self {
        case .inflating: "inflating"
        case .deflating: "deflating"
        }
    }
}

/// Takes progress records one by one as a replay makes them, where they need not be stored
/// with its other outputs first (a class: handed down a replay's inlined calls with no copy,
/// retain or context to load).
public protocol ProgressRecordSink: AnyObject {
    func take(progress: ProgressRecord)
}

/// A cuff-pressure update (from 0x2A36 / 0x2B35).
public struct ProgressRecord: Sendable, Hashable {
    public var phase: MeasurementPhase
    public var cuffPressure: SFloat
    public var unit: PressureUnit
    /// Seconds since the measurement started (first cuff-pressure value).
    public var elapsed: Double
    public var at: EventTime

    public init(phase: MeasurementPhase, cuffPressure: SFloat, unit: PressureUnit, elapsed: Double, at: EventTime) {
        self.phase = phase
        self.cuffPressure = cuffPressure
        self.unit = unit
        self.elapsed = elapsed
        self.at = at
    }

    public var json: JSON { JSON.build { write(to: &$0) } }

    @inlinable public func write<W: JSONWriter>(to w: inout W) {
        w.beginObject()
        w.key("type"); w.constant("progress")
        w.key("phase"); w.constant(phase.name)
        w.key("cuff_pressure"); cuffPressure.write(to: &w)
        w.key("unit"); w.constant(unit.name)
        // Milliseconds: the exact decimal when it is a whole number of them (nearly always).
        w.key("elapsed")
        let ms = (elapsed * 1000).rounded()
        if abs(ms) < 1e12, ms != 0 || ms.sign == .plus {
            w.decimal(ms / 1000, mantissa: Int(ms), exponent: -3)
        } else {
            w.double(ms / 1000)
        }
        w.key("received_at"); w.timestamp(wallMicros: at.wallMicros, EventTime.iso8601(wallMicros:))
        w.endObject()
    }
}

/// How a session ended.
public enum SessionOutcome: String, Sendable, Hashable, CaseIterable {
    /// At least one result arrived and the session ended normally.
    case completed
    /// The user stopped it (Ctrl-C, `--stop-after`, a stop command).
    case stopped
    /// It ended normally but no result arrived.
    case noResult = "no_result"
    case disconnected
    case timedOut = "timed_out"
    case securityRefused = "security_refused"
    case serviceMissing = "service_missing"
    case protocolError = "protocol_error"
    case connectionFailed = "connection_failed"
    /// The cuff refused the key (an Omron cuff paired with another key, or never paired).
    case keyRefused = "key_refused"
    /// Pairing asked for while the cuff was not in pairing mode (its Bluetooth button not held).
    case notInPairingMode = "not_in_pairing_mode"
    /// The cuff latched an earlier refusal: it takes no key until its batteries go out and in.
    case keyLatched = "key_latched"

    /// Exit status of `cuff measure` for this outcome.
    public var exitStatus: ExitStatus {
        switch self {
        case .completed: .success
        case .noResult: .noResult
        case .stopped: .stopped
        case .disconnected: .disconnected
        case .timedOut: .timedOut
        case .securityRefused: .securityRefused
        case .serviceMissing: .serviceMissing
        case .protocolError: .protocolError
        case .connectionFailed: .connectionFailed
        case .keyRefused: .keyRefused
        case .notInPairingMode: .notInPairingMode
        case .keyLatched: .keyLatched
        }
    }

    /// ``exitStatus``'s number.
    public var exitCode: Int32 { exitStatus.code }
}

/// The `session` record, at start and at end.
public struct SessionRecord: Sendable, Hashable {
    public enum Event: String, Sendable, CaseIterable {
        case start, end

        /// ``rawValue`` as a constant (for ``JSONWriter/constant(_:)``).
        public var name: StaticString { self == .start ? "start" : "end" }
    }
    public var event: Event
    public var device: DeviceInfo
    public var at: EventTime
    public var outcome: SessionOutcome?
    public var measurements: Int
    public var message: String?
    /// The cuff's clock minus ours, in seconds, when the session read it (Omron); written as
    /// `clock_drift_s` on the end record only when known.
    public var clockDriftSeconds: Int64?
    /// ATT requests the client sent in the session (`att_requests` on the end record; null when
    /// the session does not count them). A live session counts its own; a replay counts the ones
    /// the captured central was seen sending.
    public var attRequests: Int?
    /// Of ``attRequests``, those sent before the first reading arrived
    /// (`att_requests_before_reading`; null when no reading arrived).
    public var attRequestsBeforeReading: Int?
    /// Whether the session used what an earlier one learned about the cuff (`gatt_cache`; null
    /// where that is not known, as in a replay).
    public var gattCache: GATTCacheUse?

    public init(
        event: Event, device: DeviceInfo, at: EventTime, outcome: SessionOutcome? = nil, measurements: Int = 0,
        message: String? = nil,
        clockDriftSeconds: Int64? = nil
    ) {
        self.event = event
        self.device = device
        self.at = at
        self.outcome = outcome
        self.measurements = measurements
        self.message = message
        self.clockDriftSeconds = clockDriftSeconds
    }

    public var json: JSON { JSON.build { write(to: &$0) } }

    @inlinable public func write<W: JSONWriter>(to w: inout W) {
        w.beginObject()
        w.key("type"); w.constant("session")
        w.key("event"); w.constant(event.name)
        w.key("device"); device.write(to: &w)
        w.key("name"); w.optional(device.name)
        w.key("manufacturer"); w.optional(device.manufacturer)
        w.key("model"); w.optional(device.model)
        w.key("serial"); w.optional(device.serial)
        w.key("address"); w.string(device.address)
        w.key("features")
        if let f = device.features {
            f.writeNames(to: &w)
        } else {
            w.null()
        }
        w.key("at"); w.timestamp(wallMicros: at.wallMicros, EventTime.iso8601(wallMicros:))
        if event == .end {
            w.key("outcome"); w.optional(outcome?.rawValue)
            w.key("measurements"); w.int(Int64(measurements))
            w.key("message"); w.optional(message)
            w.key("att_requests"); if let attRequests { w.int(Int64(attRequests)) } else { w.null() }
            w.key("att_requests_before_reading");
            if let attRequestsBeforeReading { w.int(Int64(attRequestsBeforeReading)) } else { w.null() }
            w.key("gatt_cache"); if let gattCache { w.constant(gattCache.name) } else { w.null() }
            if let clockDriftSeconds { w.key("clock_drift_s"); w.int(clockDriftSeconds) }
        }
        w.endObject()
    }
}

/// How a session used the GATT cache (what an earlier session learned about the cuff: its
/// handles, Device Information and features), as the end record's `gatt_cache` says it.
public enum GATTCacheUse: String, Sendable, Hashable, CaseIterable {
    /// No cache (turned off with `--no-gatt-cache`, or a driver without one): full discovery.
    case off
    /// A cache, but nothing in it for this cuff: full discovery, and what it found is kept.
    case miss
    /// The cached handles were used: no discovery, no Device Information reads.
    case hit
    /// The cached handles proved wrong (the Database Hash differed, the cuff indicated Service
    /// Changed, or a request on a cached handle failed): discovered again.
    case stale

    /// ``rawValue`` as a constant (for ``JSONWriter/constant(_:)``).
    public var name: StaticString {
        switch self {
        case .off: "off"
        case .miss: "miss"
        case .hit: "hit"
        case .stale: "stale"
        }
    }
}

/// Everything a session hands to its sinks.
public enum SessionOutput: Sendable, Hashable {
    // Indirect: the big records stay out of line, so the enum (and every array of outputs) is
    // as small as a progress record, which most outputs are.
    indirect case session(SessionRecord)
    case progress(ProgressRecord)
    indirect case measurement(MeasurementRecord)

    public var json: JSON { JSON.build { write(to: &$0) } }

    /// The NDJSON line's object: the one shape every writer of records uses.
    @inlinable public func write<W: JSONWriter>(to w: inout W) {
        switch self {
        case let .session(s): s.write(to: &w)
        case let .progress(p): p.write(to: &w)
        case let .measurement(m):
            // `type` is "measurement" for every result, whichever characteristic carried it.
            m.write(to: &w, typeAsMeasurement: true)
        }
    }
}
