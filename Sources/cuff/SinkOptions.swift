// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffSession
import Sinks

/// `--format`, `--store`, `--quiet`: where results go.
struct SinkOptions: ParsableArguments {
    @Option(help: "Output on stdout: ndjson (default; session, progress and measurement records), fhir (R4 Observations) or omh (Open mHealth data points).")
    var format: String = "ndjson"

    @Option(help: "Also keep every measurement in this SQLite file (created with mode 0600), deduplicated.")
    var store: String?

    @Flag(help: "No progress or logs on stderr.")
    var quiet = false

    func validate() throws {
        guard ["ndjson", "fhir", "omh"].contains(format) else {
            throw ValidationError("unknown --format '\(format)'; use ndjson, fhir or omh")
        }
    }

    /// The stdout sink for `--format`.
    func stdoutSink() -> any SampleSink & Sendable {
        let out = FileDescriptorOutput.standardOutput()
        switch format {
        case "fhir": return FHIRSink(output: out)
        case "omh": return OMHSink(output: out)
        default: return NDJSONSink(output: out)
        }
    }
}
