// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import CuffTesting
import Omron
import Sinks

/// `cuff decode --protocol NAME`: the vendor protocols with public descriptions (the library's
/// own type).
public typealias VendorProtocol = CuffDecoder.VendorProtocol

/// `cuff decode`: each hex text one attribute value (or an Omron memory record, or a vendor
/// protocol's value), one JSON object per input on stdout, what failed on stderr. The values are
/// decoded by the library's ``CuffDecoder``; this reads the hex and writes the messages.
public struct DecodeService {
    public var characteristic: BPSCharacteristic = .bloodPressureMeasurement
    public var quirks: QuirkProfile.Options = []
    /// `--model`: decode that Omron model's memory records instead.
    public var omron: OmronProfile?
    public var vendorProtocol: VendorProtocol?
    public var pretty = false

    public init() {}

    /// Decodes each of `hex`, or with none, each non-blank line of stdin (answered at once).
    /// Throws ``ExitStatus/failure`` when an input did not decode, or a failed sink's status.
    public func run(_ hex: [String]) throws(ExitStatus) {
        var failed = 0
        /// `where`: "input N" (the Nth argument) or "line N" of stdin, blank lines counted (probe
        /// E3: stdin's inputs were numbered without the blank lines, so "input 2" was line 4).
        func handle(_ text: String, _ place: String) throws(SinkError) {
            let (lines, error) = decode(text)
            for json in lines { try Console.line(json.serialized(pretty: pretty)) }
            if let error {
                failed += 1
                Console.log("cuff decode: \(place): \(error)")
            }
        }
        do {
            if hex.isEmpty {
                var number = 0
                while let line = readLine(strippingNewline: true) {
                    number += 1
                    if line.allSatisfy({ $0 == " " || $0 == "\t" || $0 == "\r" }) { continue }
                    try handle(line, "line \(number)")
                    // A line read is a line answered, for a program that talks to cuff through a pipe.
                    try Console.flush()
                }
            } else {
                for (i, h) in hex.enumerated() { try handle(h, "input \(i + 1)") }
            }
            try Console.flush()
        } catch {
            throw Console.sinkFailed("cuff decode", error)
        }
        if failed > 0 { throw .failure }
    }

    /// One input: the JSON lines to print and, on failure, the message for stderr.
    public func decode(_ text: String) -> ([JSON], String?) {
        if let vendorProtocol { return Self.decodeVendorLine(text, protocol: vendorProtocol) }
        let (json, error) =
            omron.map { Self.decodeOmron(text, profile: $0) }
            ?? Self.decodeLine(text, characteristic: characteristic, quirks: quirks)
        return ([json], error)
    }

    /// Decodes one hex text; returns the JSON to print and, on failure, the message for stderr.
    public static func decodeLine(_ text: String, characteristic: BPSCharacteristic, quirks: QuirkProfile.Options) -> (
        JSON, String?
    ) {
        let trimmed = text.trimmingCharacters(in: " \t\r")
        guard let bytes = Hex.decode(trimmed) else { return Self.notHex(trimmed, in: text) }
        let v = CuffDecoder.decode(bytes, characteristic: characteristic, quirks: quirks)
        return (v.json, v.failure.map { "\(characteristic.uuidString): \($0.message)" })
    }

    /// Decodes one Omron memory record of `profile`'s layout.
    public static func decodeOmron(_ text: String, profile: OmronProfile) -> (JSON, String?) {
        let trimmed = text.trimmingCharacters(in: " \t\r")
        guard let bytes = Hex.decode(trimmed) else {
            return Self.notHex(trimmed, in: text)
        }
        let v = CuffDecoder.decode(omronRecord: bytes, profile: profile)
        return (v.json, v.failure.map { "\(profile.id): \($0.message)" })
    }

    /// Decodes one hex text as a vendor protocol's value: the JSON lines to print (a Microlife
    /// frame gives one per record; an error gives one error object) and, on failure, the message
    /// for stderr. A Microlife record slot left out is a line on stderr.
    public static func decodeVendorLine(_ text: String, protocol p: VendorProtocol) -> ([JSON], String?) {
        let trimmed = text.trimmingCharacters(in: " \t\r")
        guard let bytes = Hex.decode(trimmed) else {
            let (json, message) = Self.notHex(trimmed, in: text)
            return ([json], message)
        }
        let frame = CuffDecoder.decodeFrame(bytes, protocol: p)
        for s in frame.skipped {
            Console.log(
                "cuff decode: microlife record slot at payload offset \(s.payloadOffset) skipped: \(s.reason.rawValue)")
        }
        return (
            frame.values.map(\.json),
            frame.values.lazy.compactMap(\.failure).first.map { "\(p.rawValue): \($0.message)" }
        )
    }

    /// The answer to a line that is not hex, whatever it was to be decoded as: the message and the
    /// `raw` field quote its start only (a long line is not echoed back whole); `offset` is where
    /// in the line (UTF-8 bytes, its leading blanks counted) it stops being hex, and the detail
    /// quotes the text from there.
    static func notHex(_ trimmed: String, in line: String) -> (JSON, String) {
        let lead = line.utf8.count - String(line.drop { " \t\r".contains($0) }).utf8.count
        let at = Hex.problemOffset(trimmed) ?? 0
        let rest = String(decoding: trimmed.utf8.dropFirst(at), as: UTF8.self)
        let e = BPSDecodingError(
            .invalidHex, field: TerminalText.quotedExcerpt(trimmed), offset: lead + at,
            detail: "expected pairs of hex digits; at \(lead + at): \(TerminalText.quotedExcerpt(rest))")
        return (.object([("error", e.json), ("raw", .string(TerminalText.excerpt(trimmed)))]), e.message)
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
