// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCommands
import Foundation
import MQTTSink
import ReplayEngine
import Sinks
import Testing

/// The sinks a command's options make, in process: the store first, then stdout's format; the
/// key only with a store; replay's direct NDJSON writer only when it is the one sink.
@Suite struct SinkSetupTests {
    static func temporaryStore() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("cuff-setup-\(UUID().uuidString).db").path
    }

    @Test func withoutAStoreOnlyStdout() throws {
        var s = SinkSetup()
        s.format = .fhir
        s.keyPath = "/nonexistent/key"
        #expect(s.configuration.storeKeyPath == nil)  // a key goes with a store only
        let (fan, store) = try s.makeSinks()
        #expect(store == nil)
        #expect(fan.sinks.count == 1)
        #expect(!(fan.sinks[0] is any MeasurementStore))
        try fan.finish()
    }

    @Test func theStoreComesFirst() throws {
        let path = Self.temporaryStore()
        defer { try? FileManager.default.removeItem(atPath: path) }
        var s = SinkSetup()
        s.store = path
        s.quiet = true
        let (fan, store) = try s.makeSinks()
        #expect(fan.sinks.count == 2)
        #expect(fan.sinks[0] is SQLiteStore)
        #expect(store is SQLiteStore)
        #expect(try store?.knownKeys().isEmpty == true)
        try fan.finish()
        #expect(FileManager.default.fileExists(atPath: path))
    }

    @Test func replayWritesNDJSONDirectlyOnlyAlone() throws {
        var s = SinkSetup()
        #expect(try s.replaySinks(realtime: false).direct != nil)
        s.format = .omh
        #expect(try s.replaySinks(realtime: false).direct == nil)
        let path = Self.temporaryStore()
        defer { try? FileManager.default.removeItem(atPath: path) }
        s.format = .ndjson
        s.store = path
        let sinks = try s.replaySinks(realtime: false)
        #expect(sinks.direct == nil)
        #expect(sinks.fan.sinks.count == 2)
        #expect(sinks.fan.sinks[0] is SQLiteStore)
        try sinks.fan.finish()
    }

    @Test func aStoreThatCannotBeOpenedIsASinkError() {
        var s = SinkSetup()
        s.store = "/nonexistent-dir-\(UUID().uuidString)/store.db"
        #expect(throws: SinkError.self) { try s.makeSinks() }
    }
}

/// `--publish` targets: each its own outbox and client id, also two on one broker.
@Suite struct PublishTargetTests {
    func publishing(_ urls: [String]) throws -> MQTTPublishing {
        MQTTPublishing(
            urls: try urls.map { try MQTTURL(parsing: $0) }, caFile: nil, certFile: nil, keyFile: nil, discovery: nil,
            utcOffset: .system)
    }

    @Test func twoPrefixesOnOneBrokerDoNotShareAnOutboxOrAClient() throws {
        let p = try publishing([
            "mqtt://127.0.0.1:1883/home", "mqtt://127.0.0.1:1883/lab", "mqtt://other.example:1883/home",
        ])
        for outbox in [nil, "/tmp/cuff-outbox"] as [String?] {
            let t = p.targets(outbox: outbox, sharedWithStore: false)
            #expect(Set(t.map(\.outboxPath)).count == 3, "\(t.map(\.outboxPath))")
            #expect(Set(t.map(\.clientID)).count == 3, "\(t.map(\.clientID))")
            // The broker that has one target: named with its prefix only when it is not the default
            // (another process may publish there under another).
            #expect(
                t[2].outboxPath.hasSuffix(
                    outbox == nil ? "mqtt-other_example-1883-home.db" : "cuff-outbox.other_example-1883"),
                "\(t[2].outboxPath)")
        }
        let one = try publishing(["mqtt://127.0.0.1:1883/home"]).targets(outbox: nil, sharedWithStore: false)
        #expect(
            one[0].outboxPath
                == MQTTOutboxStore.defaultOutboxPath(for: try MQTTURL(parsing: "mqtt://127.0.0.1:1883/home")))
    }

    /// Two processes, each with one `--publish` to the same broker under its own prefix: each
    /// gets an outbox of its own (sharing one, each published the other's readings under its own
    /// prefix). The default prefix keeps the name it always had; the others name the outbox all
    /// prefixes shared before, to say what an earlier cuff left there.
    @Test func oneTargetPerProcessOnOneBrokerDoesNotShareAnOutbox() throws {
        let paths = try ["mqtt://127.0.0.1:1883", "mqtt://127.0.0.1:1883/home", "mqtt://127.0.0.1:1883/lab"].map {
            try publishing([$0]).targets(outbox: nil, sharedWithStore: false)[0]
        }
        #expect(Set(paths.map(\.outboxPath)).count == 3, "\(paths.map(\.outboxPath))")
        #expect(paths[0].outboxPath.hasSuffix("/mqtt-127_0_0_1-1883.db"), "\(paths[0].outboxPath)")
        #expect(paths.allSatisfy { $0.taggedOutboxPath != nil })
        // Where an earlier cuff kept them: `cuff` beside another prefix had `-cuff.db`; the
        // others shared the broker's one outbox.
        #expect(
            paths[0].legacyOutboxPaths.count == 1
                && paths[0].legacyOutboxPaths[0].hasSuffix("/mqtt-127_0_0_1-1883-cuff.db"))
        #expect(paths[1].outboxPath.hasSuffix("/mqtt-127_0_0_1-1883-home.db"), "\(paths[1].outboxPath)")
        #expect(paths[1].legacyOutboxPaths == [paths[0].outboxPath])
        // The same names as when the prefixes go in one command: a second `--publish` moves no
        // prefix's readings to another file (`cuff` among others had `-cuff.db`, and a sync then
        // said "empty" while a reading waited in the other).
        let all = try publishing(["mqtt://127.0.0.1:1883", "mqtt://127.0.0.1:1883/home", "mqtt://127.0.0.1:1883/lab"])
            .targets(outbox: nil, sharedWithStore: false)
        #expect(all.map(\.outboxPath) == paths.map(\.outboxPath))
        // `--outbox`: the user's path, no earlier one to name.
        let given = try publishing(["mqtt://127.0.0.1:1883/home"]).targets(outbox: "/tmp/x.db", sharedWithStore: false)
        #expect(
            given[0].outboxPath == "/tmp/x.db" && given[0].legacyOutboxPaths.isEmpty && given[0].taggedOutboxPath == nil
        )
    }
}
