// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffOptions
import CuffCommands
import CuffCore
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
            or refused them; the reason is on stderr); 10 the outbox cannot be opened or read, or the --outbox given does not exist.
            """
    )

    @Option(
        help: ArgumentHelp(
            "The PostgreSQL store: postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=…].", valueName: "url"))
    var store: String?

    @OptionGroup var publishing: PublishOptions

    @Option(
        help: ArgumentHelp(
            "The outbox (default: $XDG_STATE_HOME/cuff/outbox.db; with --publish, as cuff watch names it).",
            valueName: "path"))
    var outbox: String?

    @Option(
        name: .customLong("batch"),
        help: ArgumentHelp("Readings per transaction (default 1000).", valueName: "n", visibility: .hidden))
    var batch: Int = 1000

    @Flag(help: "No message on stderr when the outbox is emptied.")
    var quiet = false

    func validate() throws {
        guard store != nil || publishing.isEnabled else {
            throw ValidationError("give --store postgres://… or --publish mqtt://…")
        }
        if let store, !SinkFactory.isServerStore(store) {
            throw ValidationError("--store takes a postgres:// or postgresql:// URL; an SQLite store has no outbox")
        }
        guard batch >= 1 else { throw ValidationError("--batch takes a positive number of readings") }
    }

    func run() throws {
        var waiting = false
        if let store { waiting = try OutboxShipping.ship(to: store, outbox: outbox, batch: batch, quiet: quiet) }
        if let p = try publishing.setup() {
            waiting =
                try OutboxShipping.publishAll(
                    p.targets(outbox: outbox, sharedWithStore: store != nil), quiet: quiet, given: outbox)
                || waiting
        }
        // Readings still wait: as `measure`'s "connection failed".
        if waiting { throw ExitStatus.connectionFailed }
    }
}
