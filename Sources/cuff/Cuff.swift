// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser

@main
struct Cuff: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cuff",
        abstract: "Simulate and decode Bluetooth LE blood-pressure cuffs.",
        discussion: """
            Data goes to stdout as JSON, one object per line; progress and logs go to stderr.
            """,
        version: "0.1.0",
        subcommands: [Decode.self, Simulate.self, Measure.self, Replay.self]
    )
}
