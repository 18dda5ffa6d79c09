// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Testing
@testable import GATT

/// Bytes from hex text; test vectors are always valid hex.
func h(_ text: String) -> [UInt8] { Hex.decode(text)! }

let vendorUUID = BluetoothUUID("0000FF01-1234-5678-9ABC-DEF012345678")!

/// Hand-written PDUs (Core Vol 3 Part F §3.4), each with what it decodes to.
let vectors: [(hex: String, pdu: ATTPDU, note: String)] = [
    (
        "01 0a 0300 05", .errorResponse(request: .readRequest, handle: 3, error: .insufficientAuthentication),
        "Error Rsp: Read Req, handle 0x0003, Insufficient Authentication"
    ),
    (
        "01 12 0900 fd", .errorResponse(request: .writeRequest, handle: 9, error: .cccdImproperlyConfigured),
        "Error Rsp: Write Req, handle 0x0009, CCCD improperly configured"
    ),
    (
        "01 08 0100 a5", .errorResponse(request: .readByTypeRequest, handle: 1, error: ATTErrorCode(0xA5)),
        "Error Rsp with a reserved code, kept"
    ),
    ("02 f700", .exchangeMTURequest(clientMTU: 247), "Exchange MTU Req, client rx MTU 247"),
    ("03 1700", .exchangeMTUResponse(serverMTU: 23), "Exchange MTU Rsp, server rx MTU 23"),
    ("04 0100 ffff", .findInformationRequest(start: 1, end: 0xFFFF), "Find Information Req 0x0001-0xFFFF"),
    (
        "05 01 0300 0229 0400 0129",
        .findInformationResponse([
            .init(handle: 3, uuid: BluetoothUUID(0x2902)), .init(handle: 4, uuid: BluetoothUUID(0x2901)),
        ]),
        "Find Information Rsp, format 1: 0x0003 CCCD, 0x0004 user description"
    ),
    (
        "05 02 0500 78563412f0debc9a78563412 01ff0000",
        .findInformationResponse([.init(handle: 5, uuid: vendorUUID)]), "Find Information Rsp, format 2: 128-bit"
    ),
    (
        "06 0100 ffff 0028 1018", .findByTypeValueRequest(start: 1, end: 0xFFFF, type: 0x2800, value: [0x10, 0x18]),
        "Find By Type Value Req: primary service 0x1810"
    ),
    (
        "07 0100 0500 0600 ffff",
        .findByTypeValueResponse([
            .init(foundHandle: 1, groupEndHandle: 5), .init(foundHandle: 6, groupEndHandle: 0xFFFF),
        ]),
        "Find By Type Value Rsp: two groups"
    ),
    (
        "08 0100 ffff 0328", .readByTypeRequest(start: 1, end: 0xFFFF, type: .characteristic),
        "Read By Type Req: characteristic declarations"
    ),
    (
        "08 0100 ffff 78563412f0debc9a78563412 01ff0000", .readByTypeRequest(start: 1, end: 0xFFFF, type: vendorUUID),
        "Read By Type Req with a 128-bit type"
    ),
    (
        "09 07 0200 20 0300 352a 0500 10 0600 362a",
        .readByTypeResponse([.init(handle: 2, value: h("20 0300 352a")), .init(handle: 5, value: h("10 0600 362a"))]),
        "Read By Type Rsp: two characteristic declarations, 7 bytes each"
    ),
    ("0a 0300", .readRequest(handle: 3), "Read Req 0x0003"),
    ("0b 1e 8a", .readResponse(value: [0x1E, 0x8A]), "Read Rsp"),
    ("0b", .readResponse(value: []), "Read Rsp, empty value"),
    ("0c 0300 1600", .readBlobRequest(handle: 3, offset: 22), "Read Blob Req 0x0003 at 22"),
    ("0d 0102", .readBlobResponse(value: [1, 2]), "Read Blob Rsp"),
    (
        "10 0100 ffff 0028", .readByGroupTypeRequest(start: 1, end: 0xFFFF, type: .primaryService),
        "Read By Group Type Req: primary services"
    ),
    (
        "11 06 0100 0500 0018 0600 0900 1018",
        .readByGroupTypeResponse([
            .init(handle: 1, endGroupHandle: 5, value: [0x00, 0x18]),
            .init(handle: 6, endGroupHandle: 9, value: [0x10, 0x18]),
        ]),
        "Read By Group Type Rsp: GAP 0x0001-0x0005, BLS 0x0006-0x0009"
    ),
    ("12 0400 0200", .writeRequest(handle: 4, value: [2, 0]), "Write Req: CCCD 0x0004 ← indicate"),
    ("13", .writeResponse, "Write Rsp"),
    ("52 0800 01", .writeCommand(handle: 8, value: [1]), "Write Cmd"),
    ("1b 0300 1e8a", .handleValueNotification(handle: 3, value: [0x1E, 0x8A]), "Notification"),
    ("1d 0300 1e8a", .handleValueIndication(handle: 3, value: [0x1E, 0x8A]), "Indication"),
    ("1e", .handleValueConfirmation, "Confirmation"),
    ("0e 0300 0400", .unknown(opcode: .readMultipleRequest, payload: [3, 0, 4, 0]), "Read Multiple Req: not modelled"),
    ("d2 0300 01", .unknown(opcode: .signedWriteCommand, payload: [3, 0, 1]), "Signed Write Cmd: not modelled"),
    ("3f", .unknown(opcode: ATTOpcode(0x3F), payload: []), "unassigned opcode"),
]

@Suite struct ATTPDUTests {
    @Test(arguments: vectors.indices)
    func roundTrip(_ i: Int) throws {
        let v = vectors[i]
        let bytes = h(v.hex)
        #expect(try ATTPDU(parsing: bytes) == v.pdu, "\(v.note)")
        #expect(v.pdu.bytes == bytes, "\(v.note)")
        #expect(v.pdu.opcode.rawValue == bytes[0])
    }

    /// Every proper prefix of a valid PDU either fails with a field-level error at or before the
    /// cut, or is itself a valid PDU that encodes back to exactly the prefix.
    @Test(arguments: vectors.indices)
    func truncatedPrefixes(_ i: Int) {
        let bytes = h(vectors[i].hex)
        for n in 0..<bytes.count {
            let prefix = Array(bytes.prefix(n))
            do {
                let pdu = try ATTPDU(parsing: prefix)
                #expect(pdu.bytes == prefix, "\(vectors[i].note): prefix \(n)")
            } catch {
                #expect([.empty, .truncated, .invalidLength, .invalidUUIDLength].contains(error.code))
                #expect(error.offset <= n)
                #expect(n == 0 ? error.opcode == nil : error.opcode?.rawValue == bytes[0])
                // Deterministic: the same bytes fail the same way.
                #expect((try? ATTPDU(parsing: prefix)) == nil)
            }
        }
    }

    @Test func fixedFieldPrefixesAreTruncated() throws {
        let e = #expect(throws: ATTDecodingError.self) { try ATTPDU(parsing: h("0a 03")) }
        #expect(e?.code == .truncated)
        #expect(e?.opcode == .readRequest)
        #expect(e?.offset == 1)
        #expect(
            e?.description
                == "ATTDecodingError.truncated: Read Request (0x0A) at offset 1: attribute handle needs 2 bytes, 1 left"
        )
    }

    @Test func emptyPDU() {
        let e = #expect(throws: ATTDecodingError.self) { try ATTPDU(parsing: []) }
        #expect(e?.code == .empty)
        #expect(e?.opcode == nil)
    }

    @Test func readByTypeLengthMustDivideData() {
        // Length 7, but 11 bytes of data follow.
        let e = #expect(throws: ATTDecodingError.self) { try ATTPDU(parsing: h("09 07 0200 20 0300 352a 0500 10 03")) }
        #expect(e?.code == .invalidLength)
        #expect(e?.opcode == .readByTypeResponse)
        #expect(e?.offset == 2)
        #expect(e?.message == "11 bytes of attribute data are not a whole number of 7-byte elements")
    }

    @Test func readByTypeLengthBelowHandleSize() {
        let e = #expect(throws: ATTDecodingError.self) { try ATTPDU(parsing: h("09 01 02")) }
        #expect(e?.code == .invalidLength)
        #expect(e?.offset == 1)
        let g = #expect(throws: ATTDecodingError.self) { try ATTPDU(parsing: h("11 03 0100 0200")) }
        #expect(g?.code == .invalidLength)
    }

    @Test func findInformationFormat() {
        let e = #expect(throws: ATTDecodingError.self) { try ATTPDU(parsing: h("05 03 0300 0229")) }
        #expect(e?.code == .invalidFormat)
        #expect(e?.offset == 1)
        #expect(e?.message == "format 3 is neither 1 (16-bit) nor 2 (128-bit)")
        // Format 1 data that is a 128-bit entry's worth is not a whole number of 4-byte entries? It is
        // (16+2 = 18 is not a multiple of 4): rejected.
        let f = #expect(throws: ATTDecodingError.self) {
            try ATTPDU(parsing: h("05 01 0500 78563412f0debc9a78563412 01ff0000"))
        }
        #expect(f?.code == .invalidLength)
    }

    @Test func emptyListsAreInvalid() {
        for hex in ["05 01", "07", "09 04", "11 06"] {
            let e = #expect(throws: ATTDecodingError.self) { try ATTPDU(parsing: h(hex)) }
            #expect(e?.code == .invalidLength, "\(hex)")
        }
    }

    @Test func uuidFieldLength() {
        let e = #expect(throws: ATTDecodingError.self) { try ATTPDU(parsing: h("08 0100 ffff 032800")) }
        #expect(e?.code == .invalidUUIDLength)
        #expect(e?.offset == 5)
        #expect(e?.message == "attribute type is 3 bytes, not 2 or 16")
    }

    @Test func trailingBytes() {
        for hex in ["0a 0300 00", "13 00", "1e 1e", "02 1700 00", "01 0a 0300 05 00", "04 0100 ffff 00"] {
            let e = #expect(throws: ATTDecodingError.self) { try ATTPDU(parsing: h(hex)) }
            #expect(e?.code == .trailingBytes, "\(hex)")
            #expect(e?.offset == h(hex).count - 1)
        }
    }

    @Test func parsesFromASlice() throws {
        let buffer = h("ff ff 0a 0300 ff")
        #expect(try ATTPDU(parsing: buffer[2..<5]) == .readRequest(handle: 3))
    }

    @Test func responseEncodersKeepOnlyEqualLengthEntries() {
        let pdu = ATTPDU.readByTypeResponse([
            .init(handle: 2, value: [1, 2]), .init(handle: 3, value: [3, 4]),
            .init(handle: 4, value: [5]), .init(handle: 5, value: [6, 7]),
        ])
        #expect(pdu.bytes == h("09 04 0200 0102 0300 0304"))
    }

    @Test func findInformationMixedSizesUse128BitFormat() {
        let pdu = ATTPDU.findInformationResponse([
            .init(handle: 4, uuid: BluetoothUUID(0x2902)), .init(handle: 5, uuid: vendorUUID),
        ])
        #expect(pdu.bytes == h("05 02 0400 fb349b5f80000080 00100000 02290000 0500 78563412f0debc9a78563412 01ff0000"))
    }

    @Test func opcodeFlags() {
        #expect(ATTOpcode.writeCommand.isCommand)
        #expect(ATTOpcode.signedWriteCommand.isCommand)
        #expect(!ATTOpcode.writeRequest.isCommand)
        #expect(ATTOpcode(0x3F).isRequest)
        #expect(!ATTOpcode(0x7F).isRequest)
        #expect(!ATTOpcode.handleValueIndication.isRequest)
        #expect(ATTOpcode.readBlobRequest.responseOpcode == .readBlobResponse)
        #expect(ATTOpcode.readByTypeResponse.description == "Read By Type Response (0x09)")
        #expect(ATTOpcode(0x3F).description == "opcode 0x3F")
    }

    @Test func errorCodes() {
        #expect(ATTErrorCode.insufficientAuthentication.rawValue == 0x05)
        #expect(ATTErrorCode.insufficientEncryptionKeySize.rawValue == 0x0C)
        #expect(ATTErrorCode.insufficientEncryption.rawValue == 0x0F)
        #expect(ATTErrorCode.outOfRange.rawValue == 0xFF)
        #expect(ATTErrorCode.procedureAlreadyInProgress.rawValue == 0xFE)
        #expect(ATTErrorCode.application(0x01) == ATTErrorCode(0x81))
        #expect(ATTErrorCode(0x9F).isApplicationError && !ATTErrorCode(0xA0).isApplicationError)
        #expect(ATTErrorCode(0x9F).description == "Application Error (0x9F)")
        #expect(ATTErrorCode(0x14).description == "Reserved (0x14)")
        #expect(ATTErrorCode.invalidOffset.description == "Invalid Offset (0x07)")
    }
}

@Suite struct ATTPDUDescriptionTests {
    @Test func oneLineSummaries() throws {
        let cases: [(String, String)] = [
            ("08 0100 ffff 0328", "Read By Type Request 0x0001-0xFFFF type 2803"),
            ("1d 0600 1e8a", "Handle Value Indication 0x0006: 1e8a"),
            ("01 0a 0c00 05", "Error Response to Read Request (0x0A) at 0x000C: Insufficient Authentication (0x05)"),
            ("11 06 0100 0500 0018", "Read By Group Type Response 0x0001-0x0005: 0018"),
            ("05 01 0700 0229", "Find Information Response 0x0007 2902"),
            ("1e", "Handle Value Confirmation"),
            ("3f 01", "opcode 0x3F: 01"),
        ]
        for (hex, text) in cases { #expect(try ATTPDU(parsing: h(hex)).description == text) }
    }
}

/// `ATTPDU(wellFormed:)`, the replay's short path, gives what `init(parsing:)` gives, or nil.
@Suite struct ATTPDUWellFormedTests {
    /// Every opcode it knows, and some it does not, at every length up to 24 bytes (with the
    /// bytes after the opcode varied): nil, or the PDU the parser gives (the parser accepting it).
    @Test func equalsParsingOrDeclines() {
        var taken = 0
        for opcode: UInt8 in [
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x10, 0x11, 0x12, 0x13,
            0x1B, 0x1D, 0x1E, 0x52, 0xD2, 0x00, 0xFF,
        ] {
            for length in 1...24 {
                for fill: UInt8 in [0x00, 0x28, 0xA5] {
                    let bytes = [opcode] + (1..<length).map { UInt8(truncatingIfNeeded: Int(fill) &+ $0 &* 7) }
                    let quick = bytes.withUnsafeBytes { ATTPDU(wellFormed: $0) }
                    guard let quick else { continue }
                    taken += 1
                    #expect(quick == (try? ATTPDU(parsing: bytes)), "\(Hex.encode(bytes))")
                }
            }
        }
        #expect(taken > 200)
        // The commonest PDUs of a session take it.
        for text in [
            "0a 0300", "0b 4375666673", "12 0400 0200", "13", "1b 0300 00 7800", "1d 0300 1e", "1e", "01 0a 0300 05",
            "10 0100 ffff 0028", "08 0100 ffff 0328", "04 0100 ffff", "02 b900", "03 f700",
        ] {
            #expect(h(text).withUnsafeBytes { ATTPDU(wellFormed: $0) } != nil, "\(text)")
        }
        // An empty PDU, a short one, trailing bytes, and a 128-bit type go the general way.
        for bytes in [
            [], h("0a 03"), h("0a 0300 00"), h("13 00"), h("10 0100 ffff") + [UInt8](repeating: 0, count: 16),
        ] {
            #expect(bytes.withUnsafeBytes { ATTPDU(wellFormed: $0) } == nil, "\(Hex.encode(bytes))")
        }
    }
}
