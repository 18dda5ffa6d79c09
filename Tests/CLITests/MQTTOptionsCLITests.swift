import CuffTestSupport
import Foundation
import Testing

/// The `--publish` companions against a real `mosquitto` (``MosquittoBroker``): the discovery
/// prefix and its absence, two brokers at once, a client certificate, and the last will.
@Suite(
    "cuff --publish options (MQTT)", .serialized,
    .enabled(
        if: MosquittoBroker.available, "needs mosquitto, mosquitto-clients and openssl (tools/install-deps.sh --test)"))
struct MQTTOptionsCLITests {
    static let capture = MQTTCLITests.capture("irregular-pulse.btsnoop")

    /// The retained messages' topics under `topics`.
    static func topics(_ broker: MosquittoBroker, _ topics: [String]) throws -> [String] {
        try broker.retained(topics).map(\.topic)
    }

    @Test func discoveryGoesUnderTheGivenPrefixOrNowhere() throws {
        let broker = try MosquittoBroker()
        let r = try CLI.run([
            "replay", Self.capture, "--publish", broker.url, "--outbox", broker.dir + "/a.db", "--ha-discovery-prefix",
            "ha/test",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let configs = try Self.topics(broker, ["ha/test/#"])
        #expect(
            configs.count == 7 && configs.allSatisfy { $0.hasPrefix("ha/test/") && $0.hasSuffix("/config") },
            "\(configs)")
        #expect(try Self.topics(broker, ["homeassistant/#"]).isEmpty)
        // Without discovery: the readings and the state arrive, no config anywhere.
        let url = "mqtt://\(broker.user):\(broker.password)@127.0.0.1:\(broker.port)/quiet"
        let n = try CLI.run([
            "replay", Self.capture, "--publish", url, "--outbox", broker.dir + "/b.db", "--no-ha-discovery",
        ])
        #expect(n.status == 0, "\(n.stderr)")
        #expect(try Self.topics(broker, ["quiet/+/+/state"]).count == 1)
        #expect(try Self.topics(broker, ["quiet/status"]).count == 1)
        #expect(try Self.topics(broker, ["homeassistant/#"]).isEmpty)
        let after = try broker.retained(["ha/test/#"])
        #expect(
            after.count == 7 && after.allSatisfy { !$0.payload.contains("quiet/") },
            "a config was published without discovery")
    }

    @Test func twoBrokersEachGetEveryReadingThroughTheirOwnOutbox() throws {
        let first = try MosquittoBroker(), second = try MosquittoBroker()
        let base = first.dir + "/o.db"
        let r = try CLI.run([
            "replay", MQTTCLITests.capture("multi-user.btsnoop"), "--publish", first.url, "--publish", second.url,
            "--outbox", base,
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let printed = try WatchCommandTests.measurementLines(r.stdoutLines)
        #expect(printed.count >= 2)
        for b in [first, second] {
            let states = try b.retained(["cuff/+/+/state"])
            #expect(states.count == 2, "users' states on port \(b.port): \(states.map(\.topic))")
            #expect(try Self.topics(b, ["homeassistant/#"]).count == 14)
            // Its own outbox, emptied once the broker acknowledged.
            let outbox = "\(base).127_0_0_1-\(b.port)"
            #expect(FileManager.default.fileExists(atPath: outbox), "no outbox \(outbox)")
            let left = try CLI.run(["history", "--store", outbox])
            #expect(left.status == 0 && left.stdoutLines.isEmpty, "\(left.stdout)\(left.stderr)")
        }
        #expect(!r.stderr.contains(first.password) && !r.stderr.contains(second.password))
    }

    @Test func aClientCertificateLogsIn() throws {
        let broker = try MosquittoBroker()
        let url = "mqtts://127.0.0.1:\(broker.certPort)/cert"
        let with = try CLI.run([
            "replay", Self.capture, "--publish", url, "--publish-ca", broker.caFile,
            "--publish-cert", broker.clientCertFile, "--publish-key", broker.clientKeyFile, "--outbox",
            broker.dir + "/c.db",
        ])
        #expect(with.status == 0, "\(with.stderr)")
        #expect(try Self.topics(broker, ["cert/+/+/state"]).count == 1)
        let left = try CLI.run(["history", "--store", broker.dir + "/c.db"])
        #expect(left.stdoutLines.isEmpty)
        // Without the certificate the listener ends the handshake: nothing is published, the
        // readings wait in the outbox, and `sync` with the certificate sends them.
        let outbox = broker.dir + "/d.db"
        let without = try CLI.run([
            "replay", Self.capture, "--publish", url, "--publish-ca", broker.caFile, "--outbox", outbox,
        ])
        #expect(without.status == 0, "\(without.stderr)")
        #expect(without.stderr.contains("MQTT broker 127.0.0.1:\(broker.certPort)"), "\(without.stderr)")
        let taken = try WatchCommandTests.measurementLines(without.stdoutLines)
        #expect(!taken.isEmpty)
        #expect(try CLI.run(["history", "--store", outbox]).stdoutLines.count == taken.count)
        let sync = try CLI.run([
            "sync", "--publish", url, "--publish-ca", broker.caFile, "--publish-cert", broker.clientCertFile,
            "--publish-key", broker.clientKeyFile, "--outbox", outbox,
        ])
        #expect(sync.status == 0, "\(sync.stderr)")
        #expect(try CLI.run(["history", "--store", outbox]).stdoutLines.isEmpty)
    }

    /// The status topic's `offline` is the connection's last will: a `cuff watch` killed with
    /// SIGKILL (no goodbye) still leaves the cuff offline in Home Assistant.
    @Test func aKilledWatchLeavesItsLastWillOffline() throws {
        let broker = try MosquittoBroker()
        let s = try ScratchDirectory()
        let fleet = try SimulatedFleet.start(in: s, cuffs: 1)
        defer {
            fleet.signal(SIGTERM)
            _ = fleet.wait(timeout: 20)
        }
        #expect(waitUntil(10) { FileManager.default.fileExists(atPath: s.path("cuffs/cuff-0001.sock")) })
        let watch = try ChildProcess(
            ["watch", "--connect", "unix:" + s.path("cuffs"), "--publish", broker.url, "--outbox", s.path("o.db")],
            stdout: s.path("out"), stderr: s.path("watch.err"))
        func status() -> [String] { ((try? broker.retained(["cuff/status"])) ?? []).map(\.payload) }
        #expect(waitUntil(30) { status() == ["online"] }, "\(s.text("watch.err"))")
        watch.signal(SIGKILL)
        #expect(watch.wait(timeout: 10) != nil)
        #expect(waitUntil(30) { status() == ["offline"] }, "status \(status()) after SIGKILL")
    }
}
