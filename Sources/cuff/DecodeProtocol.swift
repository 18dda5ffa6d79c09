// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import BloodPressure
import CuffCore

/// `cuff decode --protocol NAME`: the vendor protocols with public descriptions.
enum VendorProtocol: String, CaseIterable, ExpressibleByArgument {
    case microlife
    case yonker
}

extension Decode {
    /// Decodes one hex text as a vendor protocol's value: the JSON lines to print (a Microlife
    /// frame gives one per record; an error gives one error object) and, on failure, the message
    /// for stderr.
    static func decodeVendorLine(_ text: String, protocol p: VendorProtocol) -> ([JSON], String?) {
        let trimmed = text.trimmingCharacters(in: " \t\r")
        guard let bytes = Hex.decode(trimmed) else {
            let (json, message) = notHex(trimmed)
            return ([json], message)
        }
        do {
            switch p {
            case .microlife:
                let payload = try Microlife.payload(ofFrame: bytes[...])
                let (records, skipped) = Microlife.records(inPayload: payload)
                for s in skipped {
                    Output.log("cuff decode: microlife record slot at payload offset \(s.payloadOffset) skipped: \(s.reason.rawValue)")
                }
                return (records.map(\.json), nil)
            case .yonker:
                let d = try Yonker.decode(bytes[...])
                return ([d.value.json(warnings: d.warnings, raw: bytes[...])], nil)
            }
        } catch {
            return ([.object([("error", error.json), ("raw", .string(Hex.encode(bytes)))])], "\(p.rawValue): \(error.message)")
        }
    }
}
