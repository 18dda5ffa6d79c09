// SPDX-License-Identifier: GPL-2.0-or-later
import CuffTestSupport
import Foundation
import GRDB
import Testing

@testable import Sinks

/// The store's own migrations: stores made by GRDB's migrator open as they are; newer ones are refused.
/// (Several processes creating one new store at once: CLITests' StoreRaceTests.)
@Suite struct StoreMigrationTests {
    @Test func aStoreMadeByGRDBsMigratorOpensAndKeepsItsRows() throws {
        // Stores written before the schema was migrated in one immediate transaction were made by
        // GRDB's DatabaseMigrator (its `grdb_migrations` table holds "v1"): they open as they are.
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("old.sqlite")
        try SQLiteStore.prepareFile(path)
        do {
            let queue = try DatabaseQueue(path: path)
            var migrator = DatabaseMigrator()
            migrator.registerMigration("v1") { try $0.execute(sql: SQLiteStore.migrations[0].sql) }
            try migrator.migrate(queue)
            try queue.close()
        }
        let store = try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        for r in try vectorRecords() { try store.write(.measurement(r)) }
        #expect(try store.history().count == 6)
        #expect(try store.appliedMigrations() == ["v1"])
        try store.finish()
    }

    @Test func aStoreFromANewerCuffIsRefusedUntouched() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let path = dir.path("newer.sqlite")
        try SQLiteStore(path: path, warn: SinkWarnings.ignore).finish()
        do {
            let queue = try DatabaseQueue(path: path)
            try queue.write { try $0.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v9')") }
            try queue.close()
        }
        #expect {
            try SQLiteStore(path: path, warn: SinkWarnings.ignore)
        } throws: { error in
            "\(error)".contains("schema migration v9") && "\(error)".contains("newer cuff")
        }
    }
}
