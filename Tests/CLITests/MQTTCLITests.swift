import CuffTestSupport
import Foundation
import Testing

/// `--publish mqtt://…` against a real `mosquitto` started by the test, read with `mosquitto_sub`.
@Suite(
    "cuff --publish (MQTT)", .serialized,
    .enabled(
        if: MosquittoBroker.available, "needs mosquitto, mosquitto-clients and openssl (tools/install-deps.sh --test)"))
struct MQTTCLITests {
    // Home Assistant's documented MQTT discovery keys (full names) for the two components used,
    // https://www.home-assistant.io/integrations/sensor.mqtt/ and …/binary_sensor.mqtt/.
    static let common: Set<String> = [
        "availability", "availability_mode", "availability_template", "availability_topic", "device", "device_class",
        "enabled_by_default", "encoding", "entity_category", "entity_picture", "expire_after", "force_update", "icon",
        "json_attributes_template", "json_attributes_topic", "name", "object_id", "default_entity_id", "origin",
        "payload_available", "payload_not_available", "platform", "qos", "state_topic", "unique_id", "value_template",
    ]
    static let sensorKeys = common.union([
        "last_reset_value_template", "options", "state_class", "suggested_display_precision", "unit_of_measurement",
    ])
    static let binarySensorKeys = common.union(["off_delay", "payload_off", "payload_on"])
    static let deviceKeys: Set<String> = [
        "configuration_url", "connections", "hw_version", "identifiers", "manufacturer", "model", "model_id", "name",
        "serial_number", "suggested_area", "sw_version", "via_device",
    ]
    static let originKeys: Set<String> = ["name", "sw_version", "support_url"]
    static let sensorClasses: Set<String> = [
        "apparent_power", "aqi", "area", "atmospheric_pressure", "battery", "blood_glucose_concentration",
        "carbon_dioxide",
        "carbon_monoxide", "current", "data_rate", "data_size", "date", "distance", "duration", "energy",
        "energy_distance",
        "energy_storage", "enum", "frequency", "gas", "humidity", "illuminance", "irradiance", "moisture", "monetary",
        "nitrogen_dioxide", "nitrogen_monoxide", "nitrous_oxide", "ozone", "ph", "pm1", "pm25", "pm10", "power",
        "power_factor",
        "precipitation", "precipitation_intensity", "pressure", "reactive_energy", "reactive_power", "signal_strength",
        "sound_pressure", "speed", "sulphur_dioxide", "temperature", "timestamp", "volatile_organic_compounds",
        "volatile_organic_compounds_parts", "voltage", "volume", "volume_flow_rate", "volume_storage", "water",
        "weight",
        "wind_direction", "wind_speed",
    ]
    static let binarySensorClasses: Set<String> = [
        "battery", "battery_charging", "carbon_monoxide", "cold", "connectivity", "door", "garage_door", "gas", "heat",
        "light",
        "lock", "moisture", "motion", "moving", "occupancy", "opening", "plug", "power", "presence", "problem",
        "running", "safety",
        "smoke", "sound", "tamper", "update", "vibration", "window",
    ]

    static func capture(_ name: String) -> String { CLI.packageRoot.appendingPathComponent("captures/\(name)").path }

    static func json(_ s: String) throws -> [String: Any] { try CLI.json(s) }

    /// A peer on 127.0.0.1:`port` that is no honest broker: Python after a listening socket bound
    /// to the port as `srv` (the script's own lines, indented as a module's), started and waited
    /// for. The caller kills it.
    static func fakePeer(_ s: ScratchDirectory, port: Int, imports: String = "socket", _ serve: String) throws
        -> ChildProcess
    {
        let script = """
            import \(imports)
            srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind(("127.0.0.1", \(port))); srv.listen(8)

            """ + serve
        try script.write(toFile: s.path("peer.py"), atomically: true, encoding: .utf8)
        let peer = try ChildProcess([s.path("peer.py")], executable: "python3", stderr: s.path("peer.err"))
        #expect(waitUntil(10) { MosquittoBroker.accepts(port) })
        return peer
    }

    /// A peer that answers CONNECT with something else (an HTTP server's 400) and hangs up, in the
    /// middle of what libmosquitto took for a packet: it was "cannot reach MQTT broker …: Success"
    /// (errno untouched), exit 0 with the reading waiting. It is no broker: exit 10, said so.
    @Test func aPeerThatAnswersInAnotherProtocolIsNoBroker() throws {
        let s = try ScratchDirectory()
        let port = MosquittoBroker.freePort()
        let peer = try Self.fakePeer(
            s, port: port,
            """
            while True:
                c, _ = srv.accept(); c.recv(4096)
                c.sendall(b"HTTP/1.1 400 Bad Request\\r\\n\\r\\n"); c.close()
            """)
        defer {
            peer.signal(SIGKILL)
            _ = peer.wait(timeout: 5)
        }
        let r = try CLI.run([
            "measure", "--simulated", "normal", "--speed", "0", "--publish", "mqtt://127.0.0.1:\(port)", "--outbox",
            s.path("ob.db"),
        ])
        #expect(r.status == 10, "\(r.stderr)")
        #expect(r.stderr.contains("does not answer as an MQTT broker"), "\(r.stderr)")
        #expect(!r.stderr.contains("Success"))
    }

    /// A broker that takes the connection and never acknowledges a publish. A `cuff watch` told
    /// to stop waited its 15 s finishing timeout and 2 s more for the `offline` status, ignoring
    /// every further signal (17 s; the README promises about 5 s). It now exits within a few
    /// seconds; the readings not acknowledged wait in the outbox, and stderr says so.
    @Test func aStoppingWatchIsNotHeldByABrokerThatNeverAcknowledges() throws {
        let s = try ScratchDirectory()
        let port = MosquittoBroker.freePort()
        let broker = try Self.fakePeer(
            s, port: port, imports: "socket, threading",
            """
            def serve(c):
                c.recv(65536); c.sendall(bytes([0x20, 2, 0, 0]))  # CONNACK, accepted
                while c.recv(65536): pass                          # never a PUBACK
            while True:
                c, _ = srv.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
            """)
        defer {
            broker.signal(SIGKILL)
            _ = broker.wait(timeout: 5)
        }
        let fleet = try SimulatedFleet.start(in: s, cuffs: 2)
        defer {
            fleet.signal(SIGINT)
            _ = fleet.wait(timeout: 10)
        }
        let watch = try ChildProcess(
            [
                "watch", "--connect", "unix:" + s.path("cuffs"), "--publish", "mqtt://127.0.0.1:\(port)", "--outbox",
                s.path("ob.db"),
            ], stdout: s.path("w.out"), stderr: s.path("w.err"), environment: ["XDG_STATE_HOME": s.path("state")])
        #expect(waitUntil(20) { s.lines("w.out").contains { $0.contains(#""type":"measurement""#) } })
        let stopped = Date()
        watch.signal(SIGTERM)
        let status = watch.wait(timeout: 30)
        let took = Date().timeIntervalSince(stopped)
        #expect(status == 0)
        #expect(took < 8, "took \(took) s")
        let err = (try? String(contentsOfFile: s.path("w.err"), encoding: .utf8)) ?? ""
        #expect(err.contains("wait in the outbox") || err.contains("waits in the outbox"), "\(err)")
        #expect(try CLI.run(["history", "--store", s.path("ob.db")]).stdoutLines.count >= 1)
    }

    /// An outbox that opens but cannot be read (its table renamed in the file's schema, as damage
    /// can leave it). Against a live broker `cuff sync` once waited out its 120 s in silence, then
    /// said "-1 still wait" (exit 9); against one that is down, at once, the same "-1". Now it says
    /// the outbox cannot be read, with the reason, at once, exit status 10, either way.
    @Test func syncOnAnOutboxThatCannotBeRead() throws {
        let broker = try MosquittoBroker()
        let out = broker.dir + "/damaged.db"
        let closed = MosquittoBroker.freePort()
        let taken = try CLI.run([
            "replay", Self.capture("normal.btsnoop"), "--publish", "mqtt://127.0.0.1:\(closed)", "--outbox", out,
        ])
        #expect(taken.status == 0, "\(taken.stderr)")
        #expect(taken.stderr.contains("1 reading waits in the outbox"), "\(taken.stderr)")
        // Same-length renames keep every record's size: the file stays a valid database.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: out))
        let from = Data("measurements".utf8), to = Data("measurementz".utf8)
        var renamed = 0
        while let r = bytes.range(of: from) {
            bytes.replaceSubrange(r, with: to)
            renamed += 1
        }
        #expect(renamed > 0)
        try bytes.write(to: URL(fileURLWithPath: out))
        let url = "mqtt://\(broker.user):\(broker.password)@127.0.0.1:\(broker.port)"
        for target in [url, "mqtt://127.0.0.1:\(closed)"] {
            let started = Date()
            let r = try CLI.run(["sync", "--publish", target, "--outbox", out], timeout: 60)
            #expect(r.status == 10, "\(target): \(r.stderr)")
            #expect(r.stderr.contains("the outbox \(out) cannot be read: "), "\(r.stderr)")
            #expect(r.stderr.contains("no such table: measurements"), "\(r.stderr)")
            // (No "-1" error number; the path is left out, as its random part may hold "-1".)
            #expect(!r.stderr.replacingOccurrences(of: out, with: "OUTBOX").contains("-1"), "\(r.stderr)")
            #expect(Date().timeIntervalSince(started) < 30)
        }
        // A mistyped --outbox once made an empty outbox (and its directory) and reported it empty,
        // exit 0, while the readings waited in the real one.
        let typo = broker.dir + "/typo/outbx.db"
        let t = try CLI.run(["sync", "--publish", url, "--outbox", typo])
        #expect(t.status == 10, "\(t.stderr)")
        #expect(t.stderr.contains("no outbox at \(typo)"), "\(t.stderr)")
        #expect(!FileManager.default.fileExists(atPath: broker.dir + "/typo"))
    }

    /// Probe Y: readings that waited in the outbox named after an old broker address went
    /// unmentioned once the address was corrected ("the outbox … is empty", exit 0). `cuff sync`
    /// names such outboxes beside its own, with their count and how to send them.
    @Test func syncNamesAnotherBrokersOutboxWithReadingsWaiting() throws {
        let broker = try MosquittoBroker()
        let closed = MosquittoBroker.freePort()
        let env = ["XDG_STATE_HOME": broker.dir + "/state"]
        let taken = try CLI.run(
            ["replay", Self.capture("normal.btsnoop"), "--quiet", "--publish", "mqtt://127.0.0.1:\(closed)/t"],
            environment: env)
        #expect(taken.status == 0, "\(taken.stderr)")
        let old = broker.dir + "/state/cuff/mqtt-127_0_0_1-\(closed)-t.db"
        #expect(FileManager.default.fileExists(atPath: old))
        let url = "mqtt://\(broker.user):\(broker.password)@127.0.0.1:\(broker.port)/t"
        let first = try CLI.run(["sync", "--publish", url], environment: env)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("note: 1 reading also waits in \(old)"), "\(first.stderr)")
        let moved = try CLI.run(["sync", "--publish", url, "--outbox", old], environment: env)
        #expect(moved.status == 0 && moved.stderr.contains("published 1 reading"), "\(moved.stderr)")
        let again = try CLI.run(["sync", "--publish", url], environment: env)
        #expect(again.status == 0 && !again.stderr.contains("note:"), "\(again.stderr)")
    }

    /// Probe Y: the retained `state` went back to an older reading when an older outbox was
    /// published later (`cuff sync`, or a second hub): the publisher only knew the times of its own
    /// run. It now reads the broker's retained states before it replaces one.
    @Test func anOlderReadingPublishedLaterDoesNotReplaceANewerRetainedState() throws {
        let broker = try MosquittoBroker()
        let closed = MosquittoBroker.freePort()
        let url = "mqtt://\(broker.user):\(broker.password)@127.0.0.1:\(broker.port)/t"
        // Hub B measures first, while its broker is unreachable: its reading waits.
        let b = try CLI.run(
            [
                "measure", "--simulated", "normal", "--speed", "0", "--seed", "1", "--quiet", "--publish",
                "mqtt://127.0.0.1:\(closed)/t", "--outbox", broker.dir + "/b.db",
            ], timeout: 60)
        #expect(b.status == 0, "\(b.stderr)")
        Thread.sleep(forTimeInterval: 1.1)  // (the next reading's time stamp is a second later at least)
        let a = try CLI.run(
            [
                "measure", "--simulated", "hypertensive", "--speed", "0", "--seed", "2", "--quiet", "--publish", url,
                "--outbox", broker.dir + "/a.db",
            ], timeout: 60)
        #expect(a.status == 0, "\(a.stderr)")
        func state() throws -> [String: Any] {
            let r = try broker.retained(["t/+/+/state"])
            #expect(r.count == 1, "\(r)")
            return try CLI.json(r.first?.payload ?? "{}")
        }
        let newer = try state()
        #expect(newer["systolic"] as? Double == 167)
        let s = try CLI.run(["sync", "--publish", url, "--outbox", broker.dir + "/b.db"], timeout: 60)
        #expect(s.status == 0 && s.stderr.contains("published 1 reading"), "\(s.stderr)")
        let after = try state()
        #expect(after["systolic"] as? Double == 167, "\(after)")
        #expect(after["measured_at"] as? String == newer["measured_at"] as? String)
        // Nothing of the check is left on the broker.
        #expect(try broker.retained(["t/#"]).allSatisfy { !$0.topic.contains("cuff-state-check") })
    }

    /// What Home Assistant's `{{ value_json.KEY }}` renders for `state` (Jinja prints null as `None`).
    static func render(_ template: String, _ state: [String: Any]) throws -> String {
        let key = try #require(
            template.firstMatch(of: /^\{\{ value_json\.([a-z_]+) \}\}$/)?.1, "unexpected template \(template)")
        switch state[String(key)] {
        case nil, is NSNull: return "None"
        case let s as String: return s
        case let n as NSNumber: return n.stringValue
        case let v?: return "\(v)"
        }
    }

    /// The measurement lines' comparable fields (as WatchCommandTests keys them).
    static func key(_ m: [String: Any]) -> String { WatchCommandTests.key(m) }

    @Test func discoveryConfigsAndStateArriveRetainedAndFollowTheDocumentedSchema() throws {
        let broker = try MosquittoBroker()
        let out = broker.dir + "/o.db"
        var printed: [[String: Any]] = []
        for c in ["irregular-pulse.btsnoop", "kpa.btsnoop", "multi-user.btsnoop", "body-movement.btsnoop"] {
            let r = try CLI.run([
                "replay", Self.capture(c), "--publish", broker.url, "--outbox", out, "--user-name", "1=Alice",
                "--user-name", "2=Bob", "--cuff-timezone", "+01:00",
            ])
            #expect(r.status == 0, "\(c): \(r.stderr)")
            #expect(!r.stderr.contains(broker.password), "the password was logged")
            printed += try WatchCommandTests.measurementLines(r.stdoutLines)
        }
        #expect(printed.count >= 4)
        let configs = try broker.retained(["homeassistant/#"])
        let states = Dictionary(
            try broker.retained(["cuff/+/+/state"]).map { ($0.topic, try Self.json($0.payload)) },
            uniquingKeysWith: { a, _ in a })
        let status = try broker.retained(["cuff/status"])
        #expect(status.map(\.payload) == ["online"])
        #expect(!configs.isEmpty && !states.isEmpty)
        var uniqueIDs: Set<String> = []
        var devices: Set<String> = []
        for c in configs {
            let parts = c.topic.split(separator: "/")
            #expect(parts.count == 5 && parts[0] == "homeassistant" && parts[4] == "config", "\(c.topic)")
            let component = String(parts[1])
            let cfg = try Self.json(c.payload)
            let allowed =
                component == "sensor" ? Self.sensorKeys : component == "binary_sensor" ? Self.binarySensorKeys : []
            #expect(
                Set(cfg.keys).isSubset(of: allowed),
                "\(c.topic): undocumented keys \(Set(cfg.keys).subtracting(allowed))")
            for k in ["name", "unique_id", "state_topic", "value_template", "availability_topic", "device"] {
                #expect(cfg[k] != nil, "\(c.topic) lacks \(k)")
            }
            #expect(cfg["availability_topic"] as? String == "cuff/status")
            #expect(
                cfg["payload_available"] as? String == "online" && cfg["payload_not_available"] as? String == "offline")
            if let dc = cfg["device_class"] as? String {
                #expect(
                    (component == "sensor" ? Self.sensorClasses : Self.binarySensorClasses).contains(dc),
                    "\(c.topic): device_class \(dc)")
            }
            let device = try #require(cfg["device"] as? [String: Any])
            #expect(Set(device.keys).isSubset(of: Self.deviceKeys), "\(Set(device.keys).subtracting(Self.deviceKeys))")
            #expect((device["identifiers"] as? [String])?.isEmpty == false)
            devices.insert((device["identifiers"] as? [String])?.first ?? "")
            if let origin = cfg["origin"] as? [String: Any] { #expect(Set(origin.keys).isSubset(of: Self.originKeys)) }
            let uid = try #require(cfg["unique_id"] as? String)
            #expect(!uniqueIDs.contains(uid), "unique_id \(uid) twice")
            uniqueIDs.insert(uid)
            // The state topic holds a retained state, and the template renders what the entity takes.
            let state = try #require(
                states[cfg["state_topic"] as? String ?? ""], "no retained state on \(cfg["state_topic"] ?? "-")")
            let rendered = try Self.render(cfg["value_template"] as? String ?? "", state)
            if component == "binary_sensor" {
                #expect(
                    [cfg["payload_on"] as? String, cfg["payload_off"] as? String, "None"].contains(rendered),
                    "\(c.topic) renders \(rendered)")
            } else if cfg["device_class"] as? String == "timestamp" {
                #expect(
                    rendered.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)/) != nil,
                    "timestamp without a zone: \(rendered)")
            } else {
                #expect(cfg["unit_of_measurement"] as? String == (uid.hasSuffix("pulse_rate") ? "bpm" : "mmHg"))
                #expect(rendered == "None" || Double(rendered) != nil, "\(c.topic) renders \(rendered)")
            }
        }
        // Seven entities for each cuff and user; a device per cuff and user, Alice named.
        #expect(configs.count == devices.count * 7)
        #expect(devices == ["cuff_SIM-000001_1", "cuff_SIM-000001_2"], "\(devices)")
        let deviceNames = configs.compactMap { c in
            ((try? Self.json(c.payload))?["device"] as? [String: Any])?["name"] as? String
        }
        #expect(
            deviceNames.contains { $0.hasSuffix("(Alice)") } && deviceNames.contains { $0.hasSuffix("(Bob)") },
            "\(Set(deviceNames))")
        // kPa readings are published in mmHg; the zone-less cuff time carries the assumed offset.
        for (_, s) in states {
            #expect(s["unit"] as? String == "mmHg")
            if s["time_basis"] as? String == "device-local-assumed-host-offset" {
                #expect((s["measured_at"] as? String)?.hasSuffix("+01:00") == true)
            }
            if let sys = s["systolic"] as? Double { #expect(sys > 40 && sys < 300, "systolic \(sys) mmHg") }
        }
        // Every reading left the outbox.
        let left = try CLI.run(["history", "--store", out])
        #expect(left.status == 0 && left.stdoutLines.isEmpty, "\(left.stdout)")
    }

    @Test func fleetUnderWatchSurvivesABrokerKilledAndRestartedWithNothingLost() throws {
        let broker = try MosquittoBroker()
        let reader = try MosquittoBroker.Reader(broker, topics: ["cuff/+/+/reading"], id: "reader")
        usleep(300_000)
        let s = try ScratchDirectory()
        let fleet = try SimulatedFleet.start(in: s, cuffs: 4)
        let watch = try ChildProcess(
            ["watch", "--connect", "unix:" + s.path("cuffs"), "--publish", broker.url, "--outbox", s.path("o.db")],
            stdout: s.path("out"), stderr: s.path("watch.err"))
        func printed() -> [[String: Any]] { (try? WatchCommandTests.measurementLines(s.lines("out"))) ?? [] }
        #expect(
            waitUntil(60) { printed().count >= 4 && reader.messages.count >= 4 }, "\(s.text("watch.err").suffix(2000))")
        // The broker is killed and stays away for a while; the cuffs go on measuring. (Once it has
        // saved the reader's session: what it took before a kill is the broker's to keep, not cuff's.)
        #expect(waitUntil(10) { FileManager.default.fileExists(atPath: broker.dir + "/mosquitto.db") })
        broker.stop(SIGKILL)
        let before = printed().count
        #expect(waitUntil(60) { printed().count >= before + 4 }, "no readings while the broker was down")
        try broker.start()
        #expect(waitUntil(60) { printed().count >= before + 8 })
        fleet.signal(SIGTERM)
        #expect(fleet.wait(timeout: 20) == 0)
        watch.signal(SIGTERM)
        #expect(watch.wait(timeout: 40) == 0, "\(s.text("watch.err").suffix(2000))")
        let confirmedKeys = Set(printed().map(Self.key))
        #expect(
            waitUntil(20) {
                confirmedKeys.isSubset(of: Set(reader.messages.compactMap { try? Self.key(Self.json($0.payload)) }))
            })
        let received = reader.messages.compactMap { try? Self.json($0.payload) }
        let receivedKeys = Set(received.map(Self.key))
        #expect(
            confirmedKeys.subtracting(receivedKeys).isEmpty,
            """
            lost: \(confirmedKeys.subtracting(receivedKeys)); reader: \((try? String(contentsOfFile: reader.output + ".err", encoding: .utf8)) ?? "")
            broker: \(((try? String(contentsOfFile: broker.dir + "/broker.log", encoding: .utf8)) ?? "").split(separator: "\n").filter { !$0.contains("Saving") }.suffix(40).joined(separator: "\n"))
            """)
        // Every payload carries its dedup key; repeats (QoS 1) carry the same one.
        #expect(received.allSatisfy { ($0["dedup_key"] as? String)?.isEmpty == false })
        let totals = try #require(WatchCommandTests.simulatorTotals(s.text("sim.err")), "\(s.text("sim.err"))")
        #expect(Set(received.compactMap { $0["dedup_key"] as? String }).count >= totals.confirmed)
        // A device per cuff, and the status is offline once the watch stopped.
        let serials = Set(received.compactMap { ($0["device"] as? [String: Any])?["serial"] as? String })
        #expect(serials.count == 4)
        // Each cuff (one user each) is a Home Assistant device on the broker, also after its restart.
        let systolic = try broker.retained(["homeassistant/sensor/+/systolic/config"])
        #expect(Set(systolic.map(\.topic)) == Set(serials.map { "homeassistant/sensor/cuff_\($0)_1/systolic/config" }))
        #expect(try broker.retained(["cuff/status"]).map(\.payload) == ["offline"])
        let err = s.text("watch.err")
        #expect(
            err.contains("cannot reach MQTT broker") || err.contains("connection to MQTT broker"), "\(err.suffix(1500))"
        )
        #expect(!err.contains(broker.password))
        let left = try CLI.run(["history", "--store", s.path("o.db")])
        #expect(left.stdoutLines.isEmpty, "readings left in the outbox: \(s.text("watch.err").suffix(3000))")
    }

    @Test func wrongPasswordWrongCAAndUnreachableHostLoseNothing() throws {
        let broker = try MosquittoBroker()
        let reader = try MosquittoBroker.Reader(broker, topics: ["cuff/+/+/reading"], id: "errors")
        usleep(300_000)
        let out = broker.dir + "/o.db"
        let capture = Self.capture("multi-user.btsnoop")
        // Wrong password: refused at once, before any reading is taken.
        let wrong = try CLI.run([
            "replay", capture, "--publish", "mqtt://\(broker.user):nope@127.0.0.1:\(broker.port)", "--outbox", out,
        ])
        #expect(wrong.status == 10, "\(wrong.stderr)")
        #expect(wrong.stderr.contains("refused the connection"), "\(wrong.stderr)")
        #expect(
            wrong.stderr.contains("cannot publish to mqtt://") && !wrong.stderr.contains("cannot open store"),
            "\(wrong.stderr)")
        #expect(!wrong.stderr.contains("nope"))
        // Unreachable: the readings are taken and wait in the outbox.
        let closed = MosquittoBroker.freePort()
        // Beside --store: the store and the outbox each keep every reading.
        let down = try CLI.run(
            [
                "replay", capture, "--store", broker.dir + "/s.db", "--publish",
                "mqtt://\(broker.user)@127.0.0.1:\(closed)", "--outbox", out,
            ],
            environment: ["CUFF_MQTT_PASSWORD": broker.password])
        #expect(down.status == 0, "\(down.stderr)")
        #expect(down.stderr.contains("cannot reach MQTT broker 127.0.0.1:\(closed)"), "\(down.stderr)")
        let taken = try WatchCommandTests.measurementLines(down.stdoutLines)
        #expect(!taken.isEmpty)
        #expect(down.stderr.contains("\(taken.count) reading\(taken.count == 1 ? "" : "s") wait"), "\(down.stderr)")
        func waiting() throws -> Int { try CLI.run(["history", "--store", out]).stdoutLines.count }
        #expect(try waiting() == taken.count)
        #expect(try CLI.run(["history", "--store", broker.dir + "/s.db"]).stdoutLines.count == taken.count)
        // Wrong password, then a CA that did not sign the broker's certificate: nothing leaves.
        // The password comes through a FIFO written once (as `<(pass show mqtt)` is): it is read
        // once, and that is the password the broker sees.
        let pwFile = broker.dir + "/pw"
        try #require(mkfifo(pwFile, 0o600) == 0)
        let writer = Thread {
            let fd = open(pwFile, O_WRONLY)
            _ = Array("nope\n".utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
        }
        writer.start()
        let s1 = try CLI.run([
            "sync", "--publish", "mqtt://\(broker.user)@127.0.0.1:\(broker.port)", "--publish-password-file", pwFile,
            "--outbox", out,
        ])
        #expect(s1.status == 9 && s1.stderr.contains("refused the connection"), "\(s1.stderr)")
        let s2 = try CLI.run(
            [
                "sync", "--publish", "mqtts://\(broker.user)@127.0.0.1:\(broker.tlsPort)", "--publish-ca",
                broker.otherCAFile, "--outbox", out,
            ],
            environment: ["CUFF_MQTT_PASSWORD": broker.password])
        #expect(
            s2.status == 9 && s2.stderr.contains("TLS with MQTT broker")
                && s2.stderr.contains("certificate verify failed"), "\(s2.stderr)")
        #expect(try waiting() == taken.count)
        #expect(reader.messages.isEmpty)
        // The right CA over TLS: every reading arrives and the outbox is empty.
        let ok = try CLI.run(
            [
                "sync", "--publish", "mqtts://\(broker.user)@127.0.0.1:\(broker.tlsPort)", "--publish-ca",
                broker.caFile, "--outbox", out,
            ],
            environment: ["CUFF_MQTT_PASSWORD": broker.password])
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(try waiting() == 0)
        #expect(
            waitUntil(10) {
                Set(reader.messages.compactMap { try? Self.key(Self.json($0.payload)) }) == Set(taken.map(Self.key))
            })
    }

    /// Two processes publishing to one broker under other topic prefixes, with default outboxes,
    /// while it is down: each reading waits in its own prefix's outbox, and `cuff sync` of each
    /// prefix publishes that prefix's readings only. (They shared `mqtt-HOST-PORT.db`, so the first
    /// sync published both processes' readings under its own prefix.) An outbox given to another
    /// prefix while it holds readings is refused, naming the command that publishes them.
    /// `--cuff-timezone` is the zone cuff sets the cuff's clock in, so the published measurement
    /// time, the cuff's time with that zone's offset, is the instant it measured, whatever the
    /// host's zone (probe P: the clock was set in the host's zone and labelled with the option's,
    /// one to five hours off).
    @Test(arguments: [("UTC", "+05:00"), ("America/New_York", "Asia/Tokyo"), ("Asia/Tokyo", "UTC")])
    func theCuffTimezoneIsTheZoneTheClockIsSetIn(hostZone: String, cuffZone: String) throws {
        let broker = try MosquittoBroker()
        let before = Date()
        let r = try CLI.run(
            [
                "measure", "--simulated", "normal", "--speed", "0", "--quiet", "--publish", broker.url, "--outbox",
                broker.dir + "/o.db", "--cuff-timezone", cuffZone,
            ], environment: ["TZ": hostZone])
        #expect(r.status == 0, "\(r.stderr)")
        let states = try broker.retained(["cuff/+/+/state"])
        let state = try Self.json(try #require(states.first, "no state").payload)
        let measured = try #require(state["measured_at"] as? String)
        let instant = try #require(ISO8601DateFormatter().date(from: measured), "\(measured)")
        // (The simulated measurement takes about 40 s of the cuff's clock, run at once.)
        #expect(
            instant.timeIntervalSince(before) > -5 && instant.timeIntervalSince(Date()) < 120,
            "measured_at \(measured) is not the time of the run (\(before))")
    }

    /// Probe D3: with `--cuff-timezone` the clock was set in that zone, but FHIR and OMH gave
    /// the cuff's time the host's offset (an hour ahead for Berlin on a UTC host); and the option
    /// was refused without `--publish`. Now every output's time is the instant it measured.
    @Test(arguments: ["fhir", "omh"], [true, false])
    func theCuffTimezoneGivesFHIRAndOMHTheirOffset(format: String, publish: Bool) throws {
        let broker = try MosquittoBroker()
        let before = Date()
        let r = try CLI.run(
            [
                "measure", "--simulated", "normal", "--speed", "0", "--quiet", "--format", format, "--cuff-timezone",
                "Asia/Tokyo",
            ]
                + (publish ? ["--publish", broker.url, "--outbox", broker.dir + "/o.db"] : []),
            environment: ["TZ": "UTC"])
        #expect(r.status == 0, "\(r.stderr)")
        let times = r.stdoutLines.compactMap { line -> String? in
            for key in ["\"effectiveDateTime\":\"", "\"date_time\":\""] {
                if let a = line.range(of: key), let b = line[a.upperBound...].firstIndex(of: "\"") {
                    return String(line[a.upperBound..<b])
                }
            }
            return nil
        }
        #expect(!times.isEmpty, "\(r.stdout)")
        for t in times {
            #expect(t.hasSuffix("+09:00"), "\(t)")
            let instant = try #require(ISO8601DateFormatter().date(from: t), "\(t)")
            #expect(
                instant.timeIntervalSince(before) > -5 && instant.timeIntervalSince(Date()) < 120,
                "\(t) is not the time of the run (\(before))")
        }
    }

    @Test func twoProcessesWithOtherPrefixesOnOneBrokerKeepTheirReadingsApart() throws {
        let broker = try MosquittoBroker()
        let s = try ScratchDirectory()
        let env = ["XDG_STATE_HOME": s.path("state"), "CUFF_MQTT_PASSWORD": broker.password]
        func url(_ prefix: String) -> String { "mqtt://\(broker.user)@127.0.0.1:\(broker.port)/\(prefix)" }
        broker.stop()
        var taken: [String: Set<String>] = [:]
        for (prefix, capture) in [("home", "normal.btsnoop"), ("lab", "multi-user.btsnoop")] {
            let r = try CLI.run(["replay", Self.capture(capture), "--publish", url(prefix)], environment: env)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stderr.contains("mqtt-127_0_0_1-\(broker.port)-\(prefix).db"), "\(r.stderr)")
            taken[prefix] = Set(try WatchCommandTests.measurementLines(r.stdoutLines).map(Self.key))
            #expect(!(taken[prefix] ?? []).isEmpty)
        }
        let homeOutbox = s.path("state") + "/cuff/mqtt-127_0_0_1-\(broker.port)-home.db"
        let refused = try CLI.run(["sync", "--publish", url("lab"), "--outbox", homeOutbox], environment: env)
        #expect(refused.status == 10, "\(refused.stderr)")
        #expect(
            refused.stderr.contains("for the MQTT topic prefix home, not the MQTT topic prefix lab")
                && refused.stderr.contains("cuff sync --publish \(url("home")) --outbox \(homeOutbox)"),
            "\(refused.stderr)")
        try broker.start()
        let reader = try MosquittoBroker.Reader(broker, topics: ["home/+/+/reading", "lab/+/+/reading"], id: "apart")
        usleep(300_000)
        for prefix in ["home", "lab"] {
            let r = try CLI.run(["sync", "--publish", url(prefix)], environment: env)
            #expect(r.status == 0, "\(r.stderr)")
        }
        func arrived(_ prefix: String) -> Set<String> {
            Set(
                reader.messages.filter { $0.topic.hasPrefix(prefix + "/") }.compactMap {
                    try? Self.key(Self.json($0.payload))
                })
        }
        #expect(waitUntil(10) { arrived("home") == taken["home"] && arrived("lab") == taken["lab"] })
        #expect(
            arrived("home") == taken["home"], "home got \(arrived("home").count), took \(taken["home"]?.count ?? 0)")
        #expect(arrived("lab") == taken["lab"], "lab got \(arrived("lab").count), took \(taken["lab"]?.count ?? 0)")
    }
}
