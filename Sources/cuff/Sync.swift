// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import MQTTSink
import PostgresStore
import Sinks

struct Sync: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Ship the readings that wait in the outbox to a PostgreSQL store or an MQTT broker.",
        discussion: """
            `cuff measure --store postgres://…` commits each reading to a local outbox before the cuff \
            is confirmed; readings the server could not take then wait there. cuff sync sends them, \
            in batches of one transaction each, and removes them from the outbox once the server has \
            committed them. A reading the server already holds is not stored twice. With --publish \
            mqtt://…, the readings waiting in that broker's outbox are published (QoS 1, oldest first) and \
            leave it once the broker acknowledged them.
            Exit status: 0 the outbox is empty; 9 readings still wait (the server could not be reached \
            or refused them; the reason is on stderr); 10 the outbox cannot be opened.
            """
    )

    /// Exit status when readings still wait in the outbox (as `measure`'s "connection failed").
    static let readingsWaitStatus: Int32 = 9

    @Option(help: ArgumentHelp("The PostgreSQL store: postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=…].", valueName: "url"))
    var store: String?

    @OptionGroup var publishing: PublishOptions

    @Option(help: ArgumentHelp("The outbox (default: $XDG_STATE_HOME/cuff/outbox.db; with --publish, as cuff watch names it).", valueName: "path"))
    var outbox: String?

    @Option(name: .customLong("batch"), help: ArgumentHelp("Readings per transaction (default 1000).", valueName: "n", visibility: .hidden))
    var batch: Int = 1000

    @Flag(help: "No message on stderr when the outbox is emptied.")
    var quiet = false

    func validate() throws {
        guard store != nil || publishing.isEnabled else { throw ValidationError("give --store postgres://… or --publish mqtt://…") }
        if let store, !SinkFactory.isServerStore(store) { throw ValidationError("--store takes a postgres:// or postgresql:// URL; an SQLite store has no outbox") }
        guard batch >= 1 else { throw ValidationError("--batch takes a positive number of readings") }
    }

    func run() throws {
        var waiting = false
        if store != nil { waiting = try shipToStore() }
        if publishing.isEnabled { waiting = try publishAll() || waiting }
        if waiting { throw ExitCode(Sync.readingsWaitStatus) }
    }

    /// `--publish`: each broker's outbox published; true when readings still wait.
    func publishAll() throws -> Bool {
        let targets: [MQTTPublishOptions]
        do { targets = try publishing.targets(outbox: outbox, sharedWithStore: store != nil) } catch {
            Output.log("cuff sync: \(error)")
            throw ExitCode(Output.sinkFailedStatus)
        }
        var waiting = false
        for t in targets {
            let box: MQTTOutboxStore
            do {
                // No check at open: a refusal is said below, once, with what waits.
                box = try MQTTOutboxStore(options: t, check: false, warn: SinkWarnings.ignore)
            } catch {
                Output.log("cuff sync: \(error)")
                throw ExitCode(Output.sinkFailedStatus)
            }
            let r = box.publishAll(timeout: .seconds(120))
            try? box.close()
            if let failure = r.failure, r.waiting != 0 {
                Output.log("cuff sync: published \(r.delivered) reading\(r.delivered == 1 ? "" : "s"); \(r.waiting) still wait in the outbox \(t.outboxPath): \(failure)")
                waiting = true
            } else if !quiet {
                Output.log("cuff sync: published \(r.delivered) reading\(r.delivered == 1 ? "" : "s") to \(t.url); the outbox \(t.outboxPath) is empty")
            }
        }
        return waiting
    }

    /// `--store postgres://…`: the outbox shipped; true when readings still wait.
    func shipToStore() throws -> Bool {
        guard let store else { return false }
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
            return true
        }
        if !quiet {
            Output.log("cuff sync: shipped \(result.shipped) reading\(result.shipped == 1 ? "" : "s") to \(url) (\(result.new) new there); the outbox \(path) is empty")
        }
        return false
    }
}
