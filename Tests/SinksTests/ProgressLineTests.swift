// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import Testing

@testable import Sinks

/// The line buffer's one-go progress line (`append(progress:)`) is byte for byte what the
/// record's own `write(to:)` gives: through the JSON tree (`json.serialized()`) and through the
/// buffer key by key, for every SFLOAT word, phase and unit, and elapsed times and wall times at
/// and past the edges of what the one-go text covers.
@Suite struct ProgressLineTests {
    static let elapsed: [Double] = [
        0, -0.0, 0.0004, 0.0005, 0.0006, -0.0004, -0.0005, -0.0006, 0.001, -0.001, 0.0015, 0.0025, 0.0105, 0.1 + 0.2,
        1.25, 1.2345, 2.675, 12.3456789, -3.5, -12.0625, 59.9995, 123_456_789.0125, 999_999_999.999,
        999_999_999.9994, 999_999_999.9995, 999_999_999.9996, 1e9, -1e9, -999_999_999.9996, 4_503_599_627.3704995,
        1e12, -1e12, 1e300, -1e300, .infinity, -.infinity, .nan, -.nan, .leastNonzeroMagnitude,
        -.leastNonzeroMagnitude, .leastNormalMagnitude, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
    ]

    static let wallMicros: [Int64] = [
        .min, .min + 1, -62_135_596_800_000_001, -62_135_596_800_000_000, -86_400_000_001, -1_000_001, -1, 0, 1,
        999, 1000, 999_999, 1_000_000, 1_795_330_917_123_456, 1_795_330_917_999_999, 1_795_330_918_000_000,
        253_402_300_799_999_999, 253_402_300_800_000_000, .max - 1, .max,
    ]

    /// Special words: NaN, NRes, +INF, −INF, reserved.
    static let specials: Set<UInt16> = [0x07FF, 0x0800, 0x07FE, 0x0802, 0x0801]

    static func check(_ records: [ProgressRecord]) {
        OneGoLines.check(records.map(SessionOutput.progress)) { buffer, o in
            guard case let .progress(p) = o else { return }
            #expect(buffer.append(progress: p) == buffer.byteCount)
            if specials.contains(p.cuffPressure.rawValue) {
                // Never a number: the special's name as a string.
                #expect(String(decoding: buffer.bytes, as: UTF8.self).contains(#""cuff_pressure":""#))
            }
        }
    }

    static func record(_ i: Int, raw: UInt16, elapsed: Double, wallMicros: Int64) -> ProgressRecord {
        ProgressRecord(
            phase: i & 1 == 0 ? .inflating : .deflating, cuffPressure: SFloat(rawValue: raw),
            unit: i >> 1 & 1 == 0 ? .mmHg : .kPa, elapsed: elapsed,
            at: EventTime(monotonic: .zero, wallMicros: wallMicros))
    }

    @Test func everySFloatWord() {
        // Every mantissa and exponent (specials included), with each phase and unit: once with an
        // elapsed time the one-go text covers, once with one of the edge cases.
        var records: [ProgressRecord] = []
        for i in 0...0xFFFF {
            let plain = Double(i % 4001 - 1000) / 1000
            let edge = Self.elapsed[i % Self.elapsed.count]
            let t = 1_795_330_917_123_456 + Int64(i) * 137_000
            records.append(Self.record(i &* 7 >> 4, raw: UInt16(i), elapsed: plain, wallMicros: t))
            records.append(Self.record(i &* 5 >> 3, raw: UInt16(i), elapsed: edge, wallMicros: -t))
        }
        Self.check(records)
    }

    @Test func everyPhaseUnitElapsedAndWallTime() {
        var records: [ProgressRecord] = []
        for (k, e) in Self.elapsed.enumerated() {
            for (j, t) in Self.wallMicros.enumerated() {
                for i in 0..<4 {
                    records.append(
                        Self.record(i, raw: [0x0064, 0xF4D2, 0x07FF, 0x2801][(j + k) % 4], elapsed: e, wallMicros: t))
                }
            }
        }
        Self.check(records)
    }

    /// Wall times a second (or 0.4 s) apart in one buffer, over every field's turn: a second's
    /// last digit, a minute, an hour, a day, a year, the epoch from below, and year 9999 into
    /// 10000 (a longer date). The buffer steps its cached second by one where it can.
    @Test func consecutiveSeconds() {
        let starts: [Int64] = [
            1_795_330_917, 1_795_335_535, 1_795_391_935, 1_798_761_535, -125, -62_135_596_925, 253_402_300_675,
        ]
        var records: [ProgressRecord] = []
        for (k, s) in starts.enumerated() {
            for step in 0..<250 {
                let micros = (s + Int64(step)) * 1_000_000 + Int64(k) * 123_457
                records.append(Self.record(step, raw: 0x0064, elapsed: Double(step) / 5, wallMicros: micros))
            }
            for step in 0..<250 {
                let micros = s * 1_000_000 + Int64(step) * 400_000
                records.append(Self.record(step, raw: 0x0064, elapsed: Double(step) / 5, wallMicros: micros))
            }
        }
        Self.check(records)
    }

    @Test func randomValues() {
        var g = SeededRandom(seed: 0x5EED_F00D)
        var records: [ProgressRecord] = []
        for i in 0..<20_000 {
            let elapsed: Double
            switch i % 4 {
            case 0: elapsed = Double(Int64.random(in: -2_000_000...2_000_000_000, using: &g)) / 1000
            case 1: elapsed = Double.random(in: -1e3...1e4, using: &g)
            case 2: elapsed = Double.random(in: -2e12...2e12, using: &g) / 1000
            default: elapsed = Double(bitPattern: g.next())
            }
            let t =
                i % 3 == 0
                ? Int64(bitPattern: g.next())
                : Int64.random(in: -5_000_000_000_000_000...5_000_000_000_000_000, using: &g)
            records.append(Self.record(i, raw: UInt16(truncatingIfNeeded: g.next()), elapsed: elapsed, wallMicros: t))
        }
        Self.check(records)
    }
}

/// Lines written in one go against the records' own `write(to:)`.
enum OneGoLines {
    /// Appends each output to a line buffer with `oneGo` and key by key (each buffer kept across
    /// outputs, so its cached date and second carry over, and cleared after each line), and to a
    /// third that only grows (`append(_:)`); all must hold the JSON tree's lines.
    static func check(_ outputs: [SessionOutput], oneGo: (NDJSONLineBuffer, SessionOutput) -> Void) {
        let fast = NDJSONLineBuffer(), written = NDJSONLineBuffer(), grown = NDJSONLineBuffer(capacity: 1)
        var all: [UInt8] = []
        var wrong = 0
        for o in outputs {
            let tree = Array((o.json.serialized() + "\n").utf8)
            all += tree
            oneGo(fast, o)
            written.appendWritten(o)
            grown.append(o)
            let one = Array(fast.bytes), keyed = Array(written.bytes)
            if one != tree || keyed != tree {
                wrong += 1
                if wrong <= 5 {
                    Issue.record(
                        """
                        tree:   \(String(decoding: tree, as: UTF8.self))
                        one go: \(String(decoding: one, as: UTF8.self))
                        keyed:  \(String(decoding: keyed, as: UTF8.self))
                        """)
                }
            }
            fast.removeAll()
            written.removeAll()
        }
        #expect(wrong == 0)
        let grownSame = Array(grown.bytes) == all
        #expect(grownSame, "a buffer grown line by line holds other bytes")
    }
}

@Suite struct SessionLineTests {
    static let strings: [String?] = [
        nil, "", "Cuff", "BP7000 \"home\" \\ 2", "é\u{7F}\u{9B}x\n\t\u{1}", String(repeating: "long name ", count: 40),
    ]
    static let addresses = ["AA:BB:CC:DD:EE:FF", "unix:/tmp/cuff.sock", "simulated", "a\"b\\c\u{1}", ""]
    static let features: [BloodPressureFeature?] = [
        nil, BloodPressureFeature(rawValue: 0), BloodPressureFeature(rawValue: 0x0021),
        BloodPressureFeature(rawValue: 0x01FF), BloodPressureFeature(rawValue: 0xFFFF),
    ]
    static let counts: [Int?] = [nil, 0, 1, 123, -1, .max, .min]
    static let drifts: [Int64?] = [nil, 0, -5, 3600, .min, .max]

    /// Field `k`'s choice for record `i` (each field steps through its list at its own pace).
    static func pick<T>(_ list: [T], _ i: Int, _ k: Int) -> T {
        list[(i / [1, 2, 3, 5, 7, 11, 13][k % 7] + k) % list.count]
    }

    @Test func everyFieldsValues() {
        var outputs: [SessionOutput] = []
        for i in 0..<4000 {
            let device = DeviceInfo(
                address: Self.pick(Self.addresses, i, 0), name: Self.pick(Self.strings, i, 1),
                manufacturer: Self.pick(Self.strings, i, 2), model: Self.pick(Self.strings, i, 3),
                serial: Self.pick(Self.strings, i, 4), firmware: Self.pick(Self.strings, i, 5),
                features: Self.pick(Self.features, i, 6))
            var r = SessionRecord(
                event: i % 2 == 0 ? .start : .end, device: device,
                at: EventTime(monotonic: .zero, wallMicros: Self.pick(ProgressLineTests.wallMicros, i, 3)),
                outcome: Self.pick([nil] + SessionOutcome.allCases, i, 2),
                measurements: Self.pick(Self.counts, i, 4) ?? 7,
                message: Self.pick(Self.strings, i, 6), clockDriftSeconds: Self.pick(Self.drifts, i, 5))
            r.attRequests = Self.pick(Self.counts, i, 1)
            r.attRequestsBeforeReading = Self.pick(Self.counts, i, 5)
            r.gattCache = Self.pick([nil] + GATTCacheUse.allCases, i, 3)
            outputs.append(.session(r))
        }
        OneGoLines.check(outputs) { buffer, o in
            guard case let .session(s) = o else { return }
            buffer.append(session: s)
        }
    }

    /// A device written again (the kept text copied) and one that differs from the last in a
    /// single field, or only in its features, or is equal through other storage: each line still
    /// the tree's.
    @Test func repeatedDevices() {
        var outputs: [SessionOutput] = []
        var device = DeviceInfo(
            address: "AA:BB:CC:DD:EE:FF", name: "cuff-sim", manufacturer: "cuff project", model: "CUFF-SIM 1",
            serial: "SIM-000001", firmware: "0.1.0")
        func add(_ d: DeviceInfo, times: Int = 2) {
            for t in 0..<times {
                outputs.append(
                    .session(
                        SessionRecord(
                            event: t % 2 == 0 ? .start : .end, device: d,
                            at: EventTime(monotonic: .zero, wallMicros: 1_795_330_917_123_456 + Int64(t)))))
            }
        }
        add(device, times: 3)
        let fields: [WritableKeyPath<DeviceInfo, String?>] = [\.name, \.manufacturer, \.model, \.serial, \.firmware]
        for (i, f) in fields.enumerated() {
            let old = device[keyPath: f]
            for value in Self.strings + [old.map { String(decoding: Array($0.utf8), as: UTF8.self) }] {
                device[keyPath: f] = value
                add(device, times: 1 + i % 3)
            }
        }
        for a in Self.addresses + [
            "AA:BB:CC:DD:EE:FF", String(decoding: Array("AA:BB:CC:DD:EE:FF".utf8), as: UTF8.self),
        ] {
            device.address = a
            add(device)
        }
        for f in Self.features {
            device.features = f
            add(device)
        }
        // Two devices taking turns (a session's start before Device Information, its end after),
        // then a third, then the first again (no longer kept).
        let bare = DeviceInfo(address: "AA:BB:CC:DD:EE:FF"), third = DeviceInfo(address: "11:22:33:44:55:66")
        for d in [bare, device, bare, device, bare, third, device, bare, third, third, device] { add(d, times: 1) }
        OneGoLines.check(outputs) { buffer, o in
            guard case let .session(s) = o else { return }
            buffer.append(session: s)
        }
    }

    /// A Date Time written by the line buffer (its 19 bytes copied as they are) is the JSON
    /// tree's `iso8601` text, or null: every month, day and time field against years of each width.
    @Test func writtenDateTimes() {
        let fields: [UInt8] = [0, 1, 9, 10, 12, 13, 23, 24, 28, 29, 30, 31, 32, 59, 60, 99, 100, 255]
        var wrong = 0
        for y: UInt16 in [0, 1, 999, 1581, 1582, 1900, 2000, 2024, 2026, 9999, 10000, 65535] {
            for (i, m) in fields.enumerated() {
                for (j, d) in fields.enumerated() {
                    let t = DateTime(
                        year: y, month: m, day: d, hours: fields[(i + j) % fields.count],
                        minutes: fields[(2 * i + j) % fields.count], seconds: fields[(i + 3 * j) % fields.count])
                    let buffer = NDJSONLineBuffer(capacity: 64)
                    var w = buffer
                    w.beginArray()
                    t.writeISO8601(to: &w)
                    w.endArray()
                    let tree = JSON.array([t.iso8601.map(JSON.string) ?? .null]).serialized()
                    if String(decoding: buffer.bytes, as: UTF8.self) != tree { wrong += 1 }
                }
            }
        }
        #expect(wrong == 0)
    }

    /// Measurement lines between session lines: the device object copied from the text kept for a
    /// session line (or kept by the measurement line for the next), for devices that repeat, differ
    /// in one field, take turns, or come back after two others; with every codec's record shape.
    @Test func measurementLinesBetweenSessionLines() throws {
        let records = try [
            Vectors.bpm(Vectors.mmHgFull), Vectors.bpm(Vectors.kPa), Vectors.bpm(Vectors.errorFrame),
            Vectors.bpm(Vectors.withDateTime, stored: true), Vectors.enhancedRecord(),
            Vectors.enhancedRecord(sequenceNumber: 7),
            // A record read back as a tree (another protocol's, or a store's).
            MeasurementRecord(
                characteristic: .named("vendor-x"), raw: [120, 1], unit: .mmHg, systolic: SFloat(120), diastolic: .nan,
                meanArterialPressure: .nan, pulseRate: nil, timestamp: nil, userID: nil, status: nil, warnings: [],
                device: Vectors.device, receivedAt: Vectors.at, stored: false, sequenceNumber: nil,
                decoded: .object([("type", .string("cuff_pressure")), ("systolic", .int(120))])),
        ]
        var devices: [DeviceInfo] = [Vectors.device, DeviceInfo(address: Vectors.device.address)]
        for (i, f) in [\DeviceInfo.name, \.manufacturer, \.model, \.serial, \.firmware].enumerated() {
            var d = Vectors.device
            d[keyPath: f] = Self.strings[(i + 1) % Self.strings.count]
            devices.append(d)
        }
        for a in Self.addresses { devices.append(DeviceInfo(address: a, name: "x\u{1}\"y")) }
        var outputs: [SessionOutput] = []
        var n = 0
        for (i, d) in (devices + devices.reversed() + devices).enumerated() {
            for k in 0..<(1 + i % 4) {
                var m = records[n % records.count]
                n += 1
                m.device = k == 2 ? devices[(i + 3) % devices.count] : d
                outputs.append(.measurement(m))
                if (i + k) % 3 == 0 {
                    outputs.append(
                        .session(SessionRecord(event: k % 2 == 0 ? .start : .end, device: d, at: Vectors.at)))
                }
            }
        }
        OneGoLines.check(outputs) { buffer, o in buffer.append(o) }
    }
}
