// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import PostgresStore
import Sinks

struct Sync: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Ship the readings that wait in the outbox to a PostgreSQL store.",
        discussion: """
            `cuff measure --store postgres://…` commits each reading to a local outbox before the cuff \
            is confirmed; readings the server could not take then wait there. cuff sync sends them, \
            in batches of one transaction each, and removes them from the outbox once the server has \
            committed them. A reading the server already holds is not stored twice.
            Exit status: 0 the outbox is empty; 9 readings still wait (the server could not be reached \
            or refused them; the reason is on stderr); 10 the outbox cannot be opened.
            """
    )

    /// Exit status when readings still wait in the outbox (as `measure`'s "connection failed").
    static let readingsWaitStatus: Int32 = 9

    @Option(help: ArgumentHelp("The PostgreSQL store: postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=…].", valueName: "url"))
    var store: String

    @Option(help: ArgumentHelp("The outbox (default: $XDG_STATE_HOME/cuff/outbox.db).", valueName: "path"))
    var outbox: String?

    @Option(name: .customLong("batch"), help: ArgumentHelp("Readings per transaction (default 1000).", valueName: "n", visibility: .hidden))
    var batch: Int = 1000

    @Flag(help: "No message on stderr when the outbox is emptied.")
    var quiet = false

    func validate() throws {
        guard SinkFactory.isServerStore(store) else { throw ValidationError("--store takes a postgres:// or postgresql:// URL; an SQLite store has no outbox") }
        guard batch >= 1 else { throw ValidationError("--batch takes a positive number of readings") }
    }

    func run() throws {
        let url: PostgresURL
        do { url = try PostgresURL(parsing: store) } catch {
            Output.log("cuff sync: \(error)")
            throw ExitCode(Output.sinkFailedStatus)
        }
        let path = outbox ?? Outbox.defaultPath()
        let box: PostgresOutboxStore
        do {
            // Warnings (an unreachable server) are said below, once, with the count.
            box = try PostgresOutboxStore(url: url, outboxPath: path, background: false, batchSize: batch, warn: SinkWarnings.ignore)
        } catch {
            Output.log("cuff sync: \(error)")
            throw ExitCode(Output.sinkFailedStatus)
        }
        let result = box.drain()
        let waiting = (try? box.outbox.count()) ?? -1
        try? box.close()
        if let failure = result.failure, waiting != 0 {
            Output.log("cuff sync: shipped \(result.shipped) reading\(result.shipped == 1 ? "" : "s"); \(waiting) still wait in the outbox \(path): \(failure)")
            throw ExitCode(Sync.readingsWaitStatus)
        }
        if !quiet {
            Output.log("cuff sync: shipped \(result.shipped) reading\(result.shipped == 1 ? "" : "s") to \(url) (\(result.new) new there); the outbox \(path) is empty")
        }
    }
}
