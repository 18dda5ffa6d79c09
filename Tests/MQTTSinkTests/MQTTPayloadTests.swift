import BloodPressure
import CuffCore
import CuffSession
import Foundation
import Sinks
import Testing
@testable import MQTTSink

/// The payloads and discovery configs `--publish` sends, from real 0x2A35 bytes.
@Suite struct MQTTPayloadTests {
    static let device = DeviceInfo(
        address: "AA:BB:CC:DD:EE:01", manufacturer: "Acme", model: "BP-1", serial: "SN 42/7", firmware: "1.2.3")

    /// A 0x2A35 value: flags, three SFLOATs, then time stamp, pulse, user and status as the flags say.
    static func record(
        flags: UInt8, sys: UInt16, dia: UInt16, map: UInt16, pulse: UInt16 = 0x0048, user: UInt8 = 1, status: UInt16 = 0
    ) throws -> MeasurementRecord {
        var raw: [UInt8] = [
            flags, UInt8(sys & 0xFF), UInt8(sys >> 8), UInt8(dia & 0xFF), UInt8(dia >> 8), UInt8(map & 0xFF),
            UInt8(map >> 8),
        ]
        if flags & 0x02 != 0 { raw += [0xEA, 0x07, 11, 25, 8, 30, 5] }  // 2026-11-25T08:30:05
        if flags & 0x04 != 0 { raw += [UInt8(pulse & 0xFF), UInt8(pulse >> 8)] }
        if flags & 0x08 != 0 { raw += [user] }
        if flags & 0x10 != 0 { raw += [UInt8(status & 0xFF), UInt8(status >> 8)] }
        let d = try BloodPressureMeasurement.decode(raw[...])
        return MeasurementRecord.from(
            bpm: d.value, warnings: d.warnings, raw: raw, device: device,
            at: EventTime(monotonic: Timestamp(nanoseconds: 1), wallMicros: 1_795_000_000_000_000), stored: false)
    }

    static func object(_ j: JSON) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(j.serialized().utf8)) as? [String: Any])
    }

    @Test func stateInMmHgWithOffsetAndFlags() throws {
        // 120/80/93 mmHg, pulse 72, user 1, irregular pulse (status bit 2).
        let m = try Self.record(flags: 0x1E, sys: 0x0078, dia: 0x0050, map: 0x005D, status: 0x0004)
        let s = try Self.object(MQTTPayload.state(m, offset: .fixed(3600)))
        #expect(s["systolic"] as? Double == 120)
        #expect(s["diastolic"] as? Double == 80)
        #expect(s["mean_arterial_pressure"] as? Double == 93)
        #expect(s["pulse_rate"] as? Double == 72)
        #expect(s["unit"] as? String == "mmHg")
        #expect(s["measured_at"] as? String == "2026-11-25T08:30:05+01:00")
        #expect(s["time_basis"] as? String == "device-local-assumed-host-offset")
        #expect(s["irregular_pulse"] as? String == "ON")
        #expect(s["body_movement"] as? String == "OFF")
        #expect(s["dedup_key"] as? String == m.dedupKey)
    }

    @Test func kPaPublishedInMmHg() throws {
        // 16.0 / 10.7 / 12.4 kPa (mantissa, exponent -1): 120.0, 80.3, 93.0 mmHg.
        let m = try Self.record(flags: 0x01, sys: 0xF0A0, dia: 0xF06B, map: 0xF07C)
        let s = try Self.object(MQTTPayload.state(m, offset: .fixed(0)))
        #expect(s["systolic"] as? Double == 120.0)
        #expect(s["diastolic"] as? Double == 80.3)
        #expect(s["mean_arterial_pressure"] as? Double == 93.0)
        #expect(s["unit"] as? String == "mmHg")
        // No status field: the binary sensors get null (Home Assistant: unknown), not OFF.
        #expect(s["irregular_pulse"] is NSNull)
        #expect(s["pulse_rate"] is NSNull)
        // No device time: the reception time, in UTC.
        #expect((s["measured_at"] as? String)?.hasSuffix("Z") == true)
    }

    @Test func specialValuesAreNeverNumbers() throws {
        // NaN systolic, NRes diastolic, +INF MAP, NaN pulse.
        let m = try Self.record(flags: 0x04, sys: 0x07FF, dia: 0x0800, map: 0x07FE, pulse: 0x07FF)
        let s = try Self.object(MQTTPayload.state(m, offset: .fixed(0)))
        for k in ["systolic", "diastolic", "mean_arterial_pressure", "pulse_rate"] {
            #expect(s[k] is NSNull, "\(k) is \(String(describing: s[k]))")
        }
        let reading = MQTTPayload.reading(m).serialized()
        #expect(!reading.contains("2047") && !reading.contains("2048"), "\(reading)")
    }

    @Test func readingIsTheNDJSONRecordWithItsDedupKey() throws {
        let m = try Self.record(flags: 0x1E, sys: 0x0078, dia: 0x0050, map: 0x005D)
        let line = SessionOutput.measurement(m).json.serialized()
        let payload = MQTTPayload.reading(m).serialized()
        #expect(payload.hasPrefix(String(line.dropLast())))
        #expect(try Self.object(MQTTPayload.reading(m))["dedup_key"] as? String == m.dedupKey)
    }

    @Test func topicsAndDiscovery() throws {
        let topics = MQTTTopics(prefix: "home/cuff")
        #expect(topics.reading(Self.device, user: 1) == "home/cuff/SN_42_7/1/reading")
        #expect(topics.state(Self.device, user: nil) == "home/cuff/SN_42_7/none/state")
        #expect(topics.status == "home/cuff/status")
        let d = HomeAssistantDiscovery(prefix: "homeassistant", userNames: [1: "Alice"])
        let configs = d.configs(device: Self.device, user: 1, topics: topics)
        #expect(configs.count == 7)
        let ids = try configs.map { try Self.object($0.payload)["unique_id"] as? String }
        #expect(Set(ids).count == 7)
        let first = try Self.object(configs[0].payload)
        #expect(configs[0].topic == "homeassistant/sensor/cuff_SN_42_7_1/systolic/config")
        let dev = try #require(first["device"] as? [String: Any])
        #expect(dev["name"] as? String == "BP-1 (Alice)")
        #expect(dev["serial_number"] as? String == "SN 42/7")
        #expect(dev["sw_version"] as? String == "1.2.3")
        #expect(first["availability_topic"] as? String == "home/cuff/status")
        // The same configs every time: ids are stable.
        #expect(
            configs.map { $0.payload.serialized() }
                == d.configs(device: Self.device, user: 1, topics: topics).map { $0.payload.serialized() })
    }

    @Test func urls() throws {
        let u = try MQTTURL(parsing: "mqtts://alice:s%40cret@broker.lan:8884/home/cuff/")
        #expect(
            u.tls && u.user == "alice" && u.password == "s@cret" && u.host == "broker.lan" && u.port == 8884
                && u.prefix == "home/cuff")
        #expect(!u.description.contains("cret"))
        #expect(MQTTURL.redacting("mqtt://a:pw@h/x") == "mqtt://a:***@h/x")
        let d = try MQTTURL(parsing: "mqtt://[::1]")
        #expect(d.host == "::1" && d.port == 1883 && d.prefix == "cuff" && d.isLoopback)
        #expect(try !MQTTURL(parsing: "mqtt://192.168.1.5").isLoopback)
        for bad in ["http://h", "mqtt://", "mqtt://h:0", "mqtt://h:99999", "mqtt://h/a/+/b", "mqtt://h:x"] {
            #expect(throws: MQTTURL.ParseError.self, "\(bad)") { try MQTTURL(parsing: bad) }
        }
        // What libmosquitto refuses only when it publishes (a reading would wait in the outbox for
        // good) or when the client is made: U+0000 (which the C string cut the topic at), other
        // control characters, a prefix past 4096 bytes; a user name or password past 65535.
        let long = String(repeating: "p", count: 4097)
        for (bad, reason) in [
            ("mqtt://h/a%00b", "control characters"), ("mqtt://h/a%1Bb", "control characters"),
            ("mqtt://h/" + long, "at most 4096 bytes"),
            ("mqtt://\(String(repeating: "u", count: 65536))@h", "user name is longer than 65535 bytes"),
            ("mqtt://u:\(String(repeating: "w", count: 65536))@h", "password is longer than 65535 bytes"),
        ] {
            #expect("\(bad.prefix(20))") {
                try MQTTURL(parsing: bad)
            } throws: { ($0 as? MQTTURL.ParseError)?.reason.contains(reason) == true }
        }
        #expect(try MQTTURL(parsing: "mqtt://h/" + long.dropLast()).prefix.utf8.count == 4096)
        #expect(try MQTTURL(parsing: "mqtt://h/a%C3%A9b").prefix == "aéb")
        #expect(MQTTTopics.problem(prefix: "home/cuff") == nil)
        #expect(MQTTTopics.problem(prefix: "a\u{85}b") != nil)  // a C1 control
        let env = ["CUFF_MQTT_PASSWORD": "fromenv"]
        #expect(
            try MQTTURL(parsing: "mqtt://bob@h").resolvingPassword(file: nil, environment: env).password == "fromenv")
        #expect(
            try MQTTURL(parsing: "mqtt://bob:url@h").resolvingPassword(file: nil, environment: env).password == "url")
        // Without a user name the variable is ignored (a password alone means nothing), not refused.
        let anonymous = try MQTTURL(parsing: "mqtt://h").resolvingPassword(file: nil, environment: env)
        #expect(anonymous.user == nil && anonymous.password == nil)
    }

    /// `--publish-password-file` reads a pipe as well as a file (`<(pass show mqtt)`): its first line.
    @Test func aPasswordFileMayBeAPipe() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pw-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fifo = dir + "/pw"
        try #require(mkfifo(fifo, 0o600) == 0)
        let writer = Thread {
            let fd = open(fifo, O_WRONLY)
            let text = Array("s3cret\nsecond line\n".utf8)
            _ = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
        }
        writer.start()
        let url = try MQTTURL(parsing: "mqtt://bob@h").resolvingPassword(file: fifo, environment: [:])
        #expect(url.password == "s3cret")
        do {
            _ = try MQTTURL(parsing: "mqtt://bob@h").resolvingPassword(file: dir + "/none", environment: [:])
            Issue.record("a missing file was read")
        } catch {
            #expect(error.reason.contains("cannot read the password file \(dir)/none"), "\(error)")
        }
    }

    /// A password file saved with CRLF line ends gives the password without the CR; a CR inside
    /// the line is the password's.
    @Test func aCRLFPasswordFileEndsAtTheCR() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pw-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for (text, password) in [("s3cret\r\nnext\r\n", "s3cret"), ("s3cret\r", "s3cret"), ("a\rb\n", "a\rb")] {
            try text.write(toFile: dir + "/pw", atomically: true, encoding: .utf8)
            let url = try MQTTURL(parsing: "mqtt://bob@h").resolvingPassword(file: dir + "/pw", environment: [:])
            #expect(url.password == password, "\(text.debugDescription)")
        }
    }

    @Test func cleartextToAnotherHostIsWarned() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mqtt-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let w = WarningCollector()
        let url = try MQTTURL(parsing: "mqtt://192.0.2.7")
        let store = try MQTTOutboxStore(
            options: MQTTPublishOptions(url: url, outboxPath: dir + "/o.db", clientID: "t"), check: false,
            warn: w.handler)
        try store.close()
        #expect(w.warnings.contains { $0.sink == "publish" && $0.message.contains("in the clear") })
        let w2 = WarningCollector()
        let local = try MQTTOutboxStore(
            options: MQTTPublishOptions(
                url: try MQTTURL(parsing: "mqtt://127.0.0.1"), outboxPath: dir + "/p.db", clientID: "t"), check: false,
            warn: w2.handler)
        try local.close()
        #expect(w2.warnings.isEmpty)
    }
}

/// `--cuff-timezone`: the offset attached to a cuff's zone-less clock.
@Suite struct CuffTimeZoneTests {
    @Test func namedZoneFollowsSummerTimeAndFixedOffsetsParse() throws {
        let berlin = try #require(UTCOffsetPolicy.cuffTimeZone("Europe/Berlin"))
        // 2026-11-25T08:30:05 (winter, +01:00) from the payload tests' bytes.
        let winter = try MQTTPayloadTests.record(flags: 0x1E, sys: 0x0078, dia: 0x0050, map: 0x005D)
        #expect(berlin.offsetSeconds(winter) == 3600)
        #expect(
            try MQTTPayloadTests.object(MQTTPayload.state(winter, offset: berlin))["measured_at"] as? String
                == "2026-11-25T08:30:05+01:00")
        var summer = winter
        summer.timestamp = "2026-07-01T12:00:00"
        #expect(berlin.offsetSeconds(summer) == 7200)
        #expect(UTCOffsetPolicy.cuffTimeZone("+05:30")?.offsetSeconds(winter) == 19800)
        #expect(UTCOffsetPolicy.cuffTimeZone("-0800")?.offsetSeconds(winter) == -28800)
        #expect(UTCOffsetPolicy.cuffTimeZone("UTC")?.offsetSeconds(winter) == 0)
        for bad in ["Mars/Olympus", "+25:00", "+1", "1:00"] {
            #expect(UTCOffsetPolicy.cuffTimeZone(bad) == nil, "\(bad)")
        }
    }
}

/// An MQTT outbox belongs to one topic prefix: readings kept for one are never published under another.
@Suite struct MQTTOutboxClaimTests {
    static func dir() throws -> String {
        let d = FileManager.default.temporaryDirectory.appendingPathComponent("claim-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        return d
    }

    static func open(
        _ url: String, _ path: String, legacy: String? = nil, tagged: String? = nil,
        warn: WarningCollector = WarningCollector()
    ) throws -> MQTTOutboxStore {
        var o = MQTTPublishOptions(url: try MQTTURL(parsing: url), outboxPath: path, clientID: "t")
        o.legacyOutboxPaths = legacy.map { [$0] } ?? []
        o.taggedOutboxPath = tagged
        return try MQTTOutboxStore(options: o, check: false, warn: warn.handler)
    }

    static func refusal(_ body: () throws -> Void) throws -> (path: String, reason: String)? {
        do { try body() } catch let e as SinkError {
            guard case let .storeOpen(p, reason) = e else { throw e }
            return (p, reason)
        }
        return nil
    }

    @Test func anOutboxHoldingAnotherPrefixsReadingsIsRefusedAndAnEmptyOneIsTaken() throws {
        let dir = try Self.dir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/o.db"
        let home = try Self.open("mqtt://127.0.0.1:1883/home", path)
        try home.insert(try MQTTPayloadTests.record(flags: 0x1E, sys: 0x0078, dia: 0x0050, map: 0x005D))
        try home.close()
        // Another prefix on the same file: refused, naming the prefix and the command that ships them.
        let r = try #require(try Self.refusal { _ = try Self.open("mqtt://127.0.0.1:1883/lab", path) })
        #expect(r.path == path)
        #expect(
            r.reason.contains("holds 1 reading for the MQTT topic prefix home, not the MQTT topic prefix lab"),
            "\(r.reason)")
        #expect(r.reason.contains("cuff sync --publish mqtt://127.0.0.1:1883/home --outbox \(path)"), "\(r.reason)")
        // Its own prefix opens it, and the reading still waits there.
        let again = try Self.open("mqtt://127.0.0.1:1883/home", path)
        #expect(try again.outbox.count() == 1)
        // Delivered and removed (keys kept): empty, so another prefix takes it, without home's keys.
        let ids = try again.outbox.pending(limit: 10).map(\.id)
        try again.outbox.remove(ids: ids, rememberingKeys: true)
        #expect(try again.outbox.sentKeys().count == 1)
        try again.close()
        let lab = try Self.open("mqtt://127.0.0.1:1883/lab", path)
        #expect(try lab.knownKeys().isEmpty, "lab never had home's reading: it must not skip it as delivered")
        try lab.close()
        #expect(throws: Never.self) { try Self.open("mqtt://127.0.0.1:1883/lab", path).close() }
    }

    /// An empty outbox another process has open for its prefix is not taken: that process may
    /// keep a reading in it at any moment (it did, and a second prefix then published it).
    @Test func anEmptyOutboxOpenForAnotherPrefixIsNotTaken() throws {
        let dir = try Self.dir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/o.db"
        let watching = try Self.open("mqtt://127.0.0.1:1883/pa", path)
        let r = try #require(try Self.refusal { _ = try Self.open("mqtt://127.0.0.1:1883/pb", path) })
        #expect(r.reason.contains("is open in another process for the MQTT topic prefix pa"), "\(r.reason)")
        // Its own prefix still opens it beside (a watch and a sync).
        try Self.open("mqtt://127.0.0.1:1883/pa", path).close()
        try watching.insert(try MQTTPayloadTests.record(flags: 0x1E, sys: 0x0078, dia: 0x0050, map: 0x005D))
        #expect(try watching.outbox.count() == 1)
        try watching.close()
        #expect(try Self.refusal { _ = try Self.open("mqtt://127.0.0.1:1883/pb", path) } != nil)
    }

    /// Prefixes whose file names are the same (`a/b`, `a_b`): the second default gets a tagged name.
    @Test func prefixesWithOneFileNameGetTwoDefaultOutboxes() throws {
        let dir = try Self.dir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let env = ["XDG_STATE_HOME": dir]
        func open(_ url: String) throws -> MQTTOutboxStore {
            let u = try MQTTURL(parsing: url)
            return try Self.open(
                url, MQTTOutboxStore.defaultOutboxPath(for: u, environment: env),
                tagged: MQTTOutboxStore.defaultOutboxPath(for: u, tagged: true, environment: env))
        }
        let ab = try open("mqtt://127.0.0.1:1883/a/b")
        try ab.insert(try MQTTPayloadTests.record(flags: 0x1E, sys: 0x0078, dia: 0x0050, map: 0x005D))
        let under = try open("mqtt://127.0.0.1:1883/a_b")
        #expect(ab.outboxPath == dir + "/cuff/mqtt-127_0_0_1-1883-a_b.db")
        #expect(under.outboxPath.hasPrefix(dir + "/cuff/mqtt-127_0_0_1-1883-a_b-") && under.outboxPath != ab.outboxPath)
        #expect(try under.outbox.count() == 0)
        try ab.close()
        try under.close()
        // A prefix too long for a file name: cut, and tagged.
        let long = String(repeating: "p", count: 300)
        let path = MQTTOutboxStore.defaultOutboxPath(
            for: try MQTTURL(parsing: "mqtt://127.0.0.1:1883/" + long), environment: env)
        #expect((path as NSString).lastPathComponent.count < 100, "\(path)")
    }

    @Test func readingsAnEarlierCuffLeftInTheSharedOutboxAreNamedUntilAPrefixClaimsIt() throws {
        let dir = try Self.dir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let legacy = dir + "/mqtt-127_0_0_1-1883.db"
        // An outbox as an earlier cuff kept it: a plain store, no claim.
        let old = try SQLiteStore(path: legacy, warn: SinkWarnings.ignore)
        try old.insert(try MQTTPayloadTests.record(flags: 0x1E, sys: 0x0078, dia: 0x0050, map: 0x005D))
        try old.insert(try MQTTPayloadTests.record(flags: 0x1E, sys: 0x0079, dia: 0x0050, map: 0x005D))
        try old.finish()
        let w = WarningCollector()
        let home = try Self.open(
            "mqtt://127.0.0.1:1883/home", dir + "/mqtt-127_0_0_1-1883-home.db", legacy: legacy, warn: w)
        #expect(home.notices.count == 1)
        try home.close()
        #expect(
            w.warnings.contains {
                $0.message.hasPrefix("2 readings wait in \(legacy)")
                    && $0.message.contains("cuff sync --publish mqtt://127.0.0.1:1883/home --outbox \(legacy)")
            }, "\(w.warnings)")
        // Nothing was made or changed in it by looking.
        #expect(SQLiteStore.outboxWaiting(path: legacy, for: Outbox.mqttDestination(prefix: "home")) == 2)
        // Once the default prefix's process claims it, they are its readings: no longer named.
        try Self.open("mqtt://127.0.0.1:1883", legacy).close()
        let w2 = WarningCollector()
        try Self.open("mqtt://127.0.0.1:1883/home", dir + "/mqtt-127_0_0_1-1883-home.db", legacy: legacy, warn: w2)
            .close()
        #expect(w2.warnings.isEmpty, "\(w2.warnings)")
        #expect(SQLiteStore.outboxWaiting(path: dir + "/none.db", for: "mqtt:home") == nil)
    }
}

/// The time a retained state names, as the publisher reads it back from the broker (to keep the
/// latest reading there): the `measured_at` its own payloads write, in every form they take.
@Suite struct RetainedStateTimeTests {
    static func at(_ measuredAt: String) -> Int64? {
        MQTTPublisher.measuredAt(
            Array(#"{"dedup_key":"k","systolic":120.0,"measured_at":"\#(measuredAt)","unit":"mmHg"}"#.utf8))
    }

    @Test func theFormsAPayloadWritesAreRead() {
        #expect(Self.at("1970-01-01T00:00:00Z") == 0)
        #expect(Self.at("2026-11-30T01:21:35Z") == 1_796_001_695)
        #expect(Self.at("2026-11-30T01:21:35+00:00") == 1_796_001_695)
        #expect(Self.at("2026-11-30T02:21:35+01:00") == 1_796_001_695)
        #expect(Self.at("2026-11-29T20:21:35-05:00") == 1_796_001_695)
        #expect(Self.at("2026-11-30T01:21:35.250Z") == 1_796_001_695)
        #expect(Self.at("2000-02-29T12:00:00Z") == 951_825_600)
    }

    @Test func anythingElseIsNoTime() {
        for bad in [
            "", "2026-11-30", "2026-11-30T01:21:35", "2026-13-30T01:21:35Z", "2026-11-30T01:21:35+0100",
            "2026-11-30 01:21:35Z", "2026-11-30T01:21:35Zjunk", "abcd-11-30T01:21:35Z",
        ] {
            #expect(Self.at(bad) == nil, "\(bad)")
        }
        #expect(MQTTPublisher.measuredAt(Array(#"{"systolic":120.0}"#.utf8)) == nil)
        #expect(MQTTPublisher.measuredAt([]) == nil)
    }
}

/// Probe D3: one reading from a cuff whose clock ran 2 h ahead kept the retained state for two
/// hours against every newer reading (the state is never replaced by an older one). A reading is
/// taken before it arrives: a device time after its arrival counts as its arrival.
@Suite struct StateOrderTimeTests {
    @Test func aDeviceTimeAfterArrivalCountsAsTheArrival() throws {
        // Device time 2026-11-25T08:30:05 (UTC here), received 2026-11-18T11:06:40Z: ahead.
        let ahead = try MQTTPayloadTests.record(flags: 0x1E, sys: 0x0078, dia: 0x0050, map: 0x005D)
        #expect(MQTTPublisher.sortTime(ahead, .fixed(0)) == 1_795_000_000)
        // Received after its device time: the device time orders it.
        var behind = ahead
        behind.receivedAt = EventTime(monotonic: Timestamp(nanoseconds: 2), wallMicros: 1_796_001_695_000_000)
        #expect(MQTTPublisher.sortTime(behind, .fixed(0)) == 1_795_595_405)
        #expect(MQTTPublisher.sortTime(behind, .fixed(3600)) == 1_795_595_405 - 3600)
        // No device time: its arrival.
        let none = try MQTTPayloadTests.record(flags: 0x1C, sys: 0x0078, dia: 0x0050, map: 0x005D)
        #expect(MQTTPublisher.sortTime(none, .fixed(0)) == 1_795_000_000)
    }
}

extension StateOrderTimeTests {
    /// A retained state read back at a publisher's start is ordered the same way: by its
    /// `received_at` when its `measured_at` is later.
    @Test func aRetainedStateIsOrderedByTheEarlierOfItsTimes() throws {
        let ahead = try MQTTPayloadTests.record(flags: 0x1E, sys: 0x0078, dia: 0x0050, map: 0x005D)
        let payload = Array(MQTTPayload.state(ahead, offset: .fixed(0)).serialized().utf8)
        #expect(MQTTPublisher.measuredAt(payload) == 1_795_595_405)
        #expect(MQTTPublisher.stateOrderTime(payload) == 1_795_000_000)
        #expect(MQTTPublisher.stateOrderTime(payload) == MQTTPublisher.sortTime(ahead, .fixed(0)))
        // Without a received_at (an older payload): its measured_at.
        #expect(MQTTPublisher.stateOrderTime(Array(#"{"measured_at":"2026-11-30T01:21:35Z"}"#.utf8)) == 1_796_001_695)
    }
}
