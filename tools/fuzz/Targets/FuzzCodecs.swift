// libFuzzer target: every Blood Pressure Service characteristic decoder, with the quirk profiles.
// Byte 0 picks the characteristic, byte 1 the quirk options; the rest is the value.
// Where a codec has an encoder, decode → encode → decode must give the same value.
import BloodPressure
import CuffCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 2 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let all = BPSCharacteristic.allCases
    let characteristic = all[Int(input[0]) % all.count]
    let quirks = QuirkProfile.Options(rawValue: input[1] & 0x03)
    let value = input[2...]

    // What `cuff decode` prints.
    if let json = try? characteristic.decodeJSON(value, quirks: quirks) {
        _ = json.serialized()
    }

    switch characteristic {
    case .bloodPressureMeasurement, .intermediateCuffPressure:
        guard let a = try? BloodPressureMeasurement.decode(value, quirks: quirks) else { return 0 }
        let b = roundTrip(a.value.encode(quirks: quirks)) { try BloodPressureMeasurement.decode($0, quirks: quirks) }
        check(a.value == b, "BloodPressureMeasurement", input)
    case .enhancedBloodPressureMeasurement, .enhancedIntermediateCuffPressure:
        let cuff = characteristic == .enhancedIntermediateCuffPressure
        guard let a = try? EnhancedBloodPressureMeasurement.decode(value, cuffPressure: cuff) else { return 0 }
        let b = roundTrip(a.value.encode()) { try EnhancedBloodPressureMeasurement.decode($0, cuffPressure: cuff) }
        check(a.value == b, "EnhancedBloodPressureMeasurement", input)
    case .bloodPressureFeature:
        guard let a = try? BloodPressureFeature.decode(value) else { return 0 }
        let b = roundTrip(a.value.encode()) { try BloodPressureFeature.decode($0) }
        check(a.value == b, "BloodPressureFeature", input)
    case .bloodPressureRecord:
        // Segments through the assembler, then the record body.
        var assembler = RecordAssembler(maxBodyLength: 512)
        var rest = value
        while !rest.isEmpty {
            let n = min(rest.count, Int(rest[rest.startIndex] & 0x1F) + 1)
            let chunk = rest.prefix(n)
            rest = rest.dropFirst(n)
            guard let segment = try? RecordSegment.decode(chunk) else { continue }
            check(segment == (try? RecordSegment.decode(segment.encode()[...])), "RecordSegment", input)
            if let body = try? assembler.feed(segment) {
                let hasCRC = input[1] & 0x80 != 0
                if let record = try? BloodPressureRecord.decodeBody(body[...], hasCRC: hasCRC) {
                    _ = try? record.value.enhancedMeasurement()
                }
            }
        }
    case .recordAccessControlPoint:
        guard let a = try? RecordAccessControlPoint.decode(value) else { return 0 }
        let b = roundTrip(a.value.encode()) { try RecordAccessControlPoint.decode($0) }
        check(a.value == b, "RecordAccessControlPoint", input)
    case .dateTime:
        guard let a = try? DateTime.decode(value) else { return 0 }
        var w = ByteWriter()
        a.value.encode(into: &w)
        let b = roundTrip(w.bytes) { try DateTime.decode($0) }
        check(a.value == b, "DateTime", input)
    case .currentTime:
        guard let a = try? CurrentTime.decode(value) else { return 0 }
        let b = roundTrip(a.value.encode()) { try CurrentTime.decode($0) }
        check(a.value == b, "CurrentTime", input)
    }
    return 0
}

/// Decodes what an encoder wrote; an encoder's output that does not decode is a bug.
func roundTrip<T>(_ bytes: [UInt8], _ decode: (ArraySlice<UInt8>) throws -> Decoded<T>) -> T? {
    do {
        return try decode(bytes[...]).value
    } catch {
        fatalError("re-decoding the encoder's own output failed: \(error) for \(Hex.encode(bytes))")
    }
}

func check(_ ok: Bool, _ what: String, _ input: [UInt8]) {
    if !ok { fatalError("\(what): decode → encode → decode differs for input \(Hex.encode(input))") }
}
