// libFuzzer target: the ATT PDU parser. A PDU that parses must encode back to bytes that parse to
// the same PDU, and its description must not trap.
import CuffCore
import GATT

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    guard let pdu = try? ATTPDU(parsing: input) else { return 0 }
    _ = String(describing: pdu)
    var w = ByteWriter()
    pdu.encode(into: &w)
    guard let again = try? ATTPDU(parsing: w.bytes) else {
        fatalError(
            "ATTPDU: the encoding of a parsed PDU does not parse: \(Hex.encode(w.bytes)) from \(Hex.encode(input))")
    }
    if again != pdu {
        fatalError("ATTPDU: parse → encode → parse differs: \(Hex.encode(input)) → \(Hex.encode(w.bytes))")
    }
    return 0
}
