// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffOptions
import CuffCommands
import Sinks

struct History: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Print what a store holds, in the order it was received, in any output format.",
        discussion: """
            Measurements are decoded again from the raw bytes the store kept; the store is opened \
            read-only. A row that cannot be read (a damaged cell, raw bytes that no longer decode) is \
            skipped with a warning naming its row id, and the rest is printed. Exit status 0; 11 when \
            rows were skipped; 10 when the store cannot be read or stdout cannot be written (141, \
            quietly, when its reader went away).
            """
    )

    @Option(
        help: ArgumentHelp(
            "The store written by `cuff measure --store`: an SQLite file or a postgres:// URL.", valueName: "path|url"))
    var store: String

    @Option(help: "Output on stdout: NDJSON records, FHIR R4 Observations or Open mHealth data points.")
    var format: OutputFormat = .ndjson

    @Option(
        name: .customLong("fhir-subject"),
        help: "FHIR Observation.subject: cuff-user (default), Type/id, SYSTEM|VALUE or a display name.")
    var fhirSubject: String?

    @OptionGroup var key: StoreKeyOption

    func validate() throws {
        if let f = fhirSubject, let p = FHIRSubject.problem(in: f) { throw ValidationError("--fhir-subject: \(p)") }
    }

    func run() throws {
        try StoreCommands.printHistory(store: store, format: format, fhirSubject: fhirSubject, keyPath: key.path)
    }
}
