// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffOptions
import CuffCommands
import BloodPressure
import Omron

struct Decode: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Decode Blood Pressure Service characteristic values given as hex.",
        discussion: """
            Each HEX argument (or, with none, each non-blank line of stdin) is one attribute value; bytes \
            may be separated by spaces, colons or nothing. With --model, each is one memory record of that \
            Omron model instead (an empty slot is an error with code empty_record); with --protocol \
            microlife, a response frame (one object per record). Prints one JSON object per input; stderr \
            names a failed one as "input N" (the Nth argument) or "line N" (of stdin). Exit status 0 when \
            every input decoded, 1 otherwise, 10 when stdout cannot be written (141, quietly, when its \
            reader went away), 64 a usage error.
            """
    )

    @Option(help: "The characteristic the values are from (default: 2a35).")
    var characteristic: BPSCharacteristic?

    @Option(help: "Device quirk profile.")
    var quirk: QuirkProfile?

    @Option(
        help:
            "An Omron model id, alias or sales name (e.g. HEM-7361T, HEM-7155T_ESL1, Evolv): decode its memory records."
    )
    var model: String?
    @Option(
        name: .customLong("protocol"),
        help:
            "Decode a vendor protocol's value instead: microlife (one whole response frame, header to checksum; one line per record) or yonker (the 15-byte notification)."
    )
    var vendorProtocol: VendorProtocol?

    @Flag(name: .long, help: "Indent the JSON.")
    var pretty = false

    @Argument(help: "Attribute values as hex, e.g. '1E 8A 00 58 00 78 00'.")
    var hex: [String] = []

    func validate() throws {
        if let model { _ = try OmronModelOption.profile(model) }
        if model != nil, characteristic != nil || quirk != nil {
            throw ValidationError("--model decodes Omron memory records; it does not take --characteristic or --quirk")
        }
        // A vendor protocol's frame has its own layout: a quirk or a characteristic would be ignored.
        if let vendorProtocol, model != nil || characteristic != nil || quirk != nil {
            throw ValidationError(
                "--protocol \(vendorProtocol.rawValue) decodes that protocol's own frames; it does not take --model, --characteristic or --quirk"
            )
        }
    }

    func run() throws {
        var service = DecodeService()
        service.characteristic = characteristic ?? .bloodPressureMeasurement
        service.quirks = quirk?.options ?? []
        service.omron = model.flatMap(OmronCatalog.profile(named:))
        service.vendorProtocol = vendorProtocol
        service.pretty = pretty
        try service.run(hex)
    }
}
