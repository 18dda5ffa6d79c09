// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffOptions
import CuffCommands
import CuffCore
import CuffLogging
import Transport
#if canImport(Glibc)
    import Glibc
#endif

/// stdout and stderr (the commands' own code calls them `Console`).
typealias Output = Console

@main
struct Cuff: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cuff",
        abstract: "Simulate and decode Bluetooth LE blood-pressure cuffs.",
        discussion: """
            Data goes to stdout as JSON, one object per line; progress and logs go to stderr.
            """,
        version: CuffRelease.version,
        subcommands: [
            Decode.self, Scan.self, Pair.self, Measure.self, Watch.self, Replay.self, Simulate.self, History.self,
            Sync.self, PlotCommand.self, KeyCommand.self,
        ]
    )

    static func main() {
        // A closed stdout (`cuff measure | head`) becomes a write error the sinks report, not a kill.
        Sys.ignore(signal: SIGPIPE)
        // A file-size limit (`ulimit -f`) becomes EFBIG, a store error said and handled as a full
        // disk's, not a kill without a word.
        Sys.ignore(signal: SIGXFSZ)
        // Every Logger writes cuff's own stderr lines (`cuff watch: …`).
        StandardErrorLogHandler.bootstrap()
        do {
            var command = try parseAsRoot(nil)
            try command.run()
        } catch let failure as any ExitStatusError {
            exit(withError: ExitCode(failure.exitStatus.code))
        } catch {
            exit(withError: error)
        }
    }
}
