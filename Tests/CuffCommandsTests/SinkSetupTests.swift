// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCommands
import Foundation
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
