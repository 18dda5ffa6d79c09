// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import BloodPressure
import CuffCore
import Omron
import Sinks

struct Decode: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Decode Blood Pressure Service characteristic values given as hex.",
        discussion: """
            Each HEX argument (or, with none, each line of stdin) is one attribute value; bytes may be \
            separated by spaces, colons or nothing. With --model, each is one memory record of that Omron \
            model instead (an empty slot is an error with code empty_record). Prints one JSON object per input. Exit status 0 when \
            every input decoded, 1 otherwise, 10 when stdout cannot be written (141, quietly, when its reader went away).
            """
    )

    @Option(help: "The characteristic the values are from (default: 2a35).")
    var characteristic: BPSCharacteristic?

    @Option(help: "Device quirk profile.")
    var quirk: QuirkProfile?

    @Option(help: "An Omron model id, alias or sales name (e.g. HEM-7361T, HEM-7155T_ESL1, Evolv): decode its memory records.")
    var model: String?
    @Option(name: .customLong("protocol"), help: "Decode a vendor protocol's value instead: microlife (one whole response frame, header to checksum; one line per record) or yonker (the 15-byte notification).")
    var vendorProtocol: VendorProtocol?

    @Flag(name: .long, help: "Indent the JSON.")
    var pretty = false

    @Argument(help: "Attribute values as hex, e.g. '1E 8A 00 58 00 78 00'.")
    var hex: [String] = []

    func validate() throws {
        if let model, OmronCatalog.profile(named: model) == nil {
            throw ValidationError("unknown Omron model '\(model)' (closest profile: \(OmronCatalog.closest(to: model).id)); see the README's list")
        }
        if model != nil, characteristic != nil || quirk != nil {
            throw ValidationError("--model decodes Omron memory records; it does not take --characteristic or --quirk")
        }
    }

    func run() throws {
        let profile = model.flatMap(OmronCatalog.profile(named:))
        let quirks = quirk?.options ?? []
        var failed = 0
        var index = 0
        func handle(_ text: String) throws(SinkError) {
            index += 1
            if let vendorProtocol {
                let (lines, error) = Decode.decodeVendorLine(text, protocol: vendorProtocol)
                for json in lines { try Output.line(json.serialized(pretty: pretty)) }
                if let error {
                    failed += 1
                    Output.log("cuff decode: input \(index): \(error)")
                }
                return
            }
            let (json, error) = profile.map { Decode.decodeOmron(text, profile: $0) }
                ?? Decode.decodeLine(text, characteristic: characteristic ?? .bloodPressureMeasurement, quirks: quirks)
            try Output.line(json.serialized(pretty: pretty))
            if let error {
                failed += 1
                Output.log("cuff decode: input \(index): \(error)")
            }
        }
        do {
            if hex.isEmpty {
                while let line = readLine(strippingNewline: true) {
                    if line.allSatisfy({ $0 == " " || $0 == "\t" || $0 == "\r" }) { continue }
                    try handle(line)
                    // A line read is a line answered, for a program that talks to cuff through a pipe.
                    try Output.flush()
                }
            } else {
                for h in hex { try handle(h) }
            }
            try Output.flush()
        } catch {
            throw ExitCode(Output.sinkFailed("cuff decode", error))
        }
        if failed > 0 { throw ExitCode(1) }
    }

    /// Decodes one hex text; returns the JSON to print and, on failure, the message for stderr.
    static func decodeLine(_ text: String, characteristic: BPSCharacteristic, quirks: QuirkProfile.Options) -> (JSON, String?) {
        let trimmed = text.trimmingCharacters(in: " \t\r")
        guard let bytes = Hex.decode(trimmed) else { return notHex(trimmed) }
        do {
            return (try characteristic.decodeJSON(bytes[...], quirks: quirks), nil)
        } catch {
            return (.object([("error", error.json), ("raw", .string(Hex.encode(bytes)))]), "\(characteristic.uuidString): \(error.message)")
        }
    }

    /// The answer to a line that is not hex, whatever it was to be decoded as: the message and the
    /// `raw` field quote its start only (a long line is not echoed back whole).
    static func notHex(_ trimmed: String) -> (JSON, String) {
        let e = BPSDecodingError(.invalidHex, field: TerminalText.quotedExcerpt(trimmed), offset: 0, detail: "expected pairs of hex digits")
        return (.object([("error", e.json), ("raw", .string(TerminalText.excerpt(trimmed)))]), e.message)
    }
}

extension Decode {
    /// Decodes one Omron memory record of `profile`'s layout.
    static func decodeOmron(_ text: String, profile: OmronProfile) -> (JSON, String?) {
        let trimmed = text.trimmingCharacters(in: " \t\r")
        guard let bytes = Hex.decode(trimmed) else { return notHex(trimmed) }
        do {
            let r = try OmronRecordCodec.decode(bytes[...], layout: profile.layout, slotSize: profile.slotSize)
            return (r.json(profile: profile, user: nil, slot: nil, raw: bytes), nil)
        } catch {
            return (.object([("error", error.json), ("raw", .string(Hex.encode(bytes)))]), "\(profile.id): \(error.message)")
        }
    }
}

extension String {
    func trimmingCharacters(in set: String) -> String {
        let chars = Set(set)
        var s = Substring(self)
        while let f = s.first, chars.contains(f) { s.removeFirst() }
        while let l = s.last, chars.contains(l) { s.removeLast() }
        return String(s)
    }
}
