// SPDX-License-Identifier: GPL-2.0-or-later

import CuffTesting
import Foundation
import Testing

/// `cuff decode`'s keys of a decoded object, parsed back from its line.
func parsed(_ v: DecodedValue) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(v.line.utf8)) as? [String: Any])
}

func bytes(_ hex: String) -> [UInt8] { Hex.decode(hex) ?? [] }

@Suite("CuffTesting: decode one value")
struct DecoderTests {
    /// The vector of `cuff decode`'s own test (Blood Pressure Service spec layout: flags 0x1E).
    @Test func aMeasurementWithEveryField() throws {
        let v = CuffDecoder.decode(bytes("1E 8A 00 58 00 78 00 00 00 04 11 14 29 3B 3C 00 01 27 00"))
        #expect(v.failure == nil)
        let j = try parsed(v)
        #expect(j["type"] as? String == "measurement")
        #expect(j["characteristic"] as? String == "2A35")
        #expect(j["systolic"] as? Double == 138)
        #expect(j["pulse_rate"] as? Double == 60)
        #expect(j["user_id"] as? Int == 1)
        #expect(j["raw"] as? String == "1e8a00580078000000041114293b3c00012700")
    }

    @Test func specialValuesAreNamedNeverNumbers() {
        let line = CuffDecoder.decode(bytes("14 FF 07 00 08 FE 07 02 08 00 00")).line
        #expect(line.contains("\"systolic\":\"NaN\""))
        #expect(line.contains("\"diastolic\":\"NRes\""))
        #expect(!line.contains("2047"))
    }

    @Test func aTruncatedValueGivesTheErrorObjectAndItsCode() throws {
        let v = CuffDecoder.decode(bytes("03 02 03"), characteristic: .intermediateCuffPressure)
        #expect(v.failure?.code == "truncated")
        #expect(v.failure == .bloodPressure(BPSDecodingError(.truncated, field: "Diastolic", offset: 3)))
        let error = try #require(try parsed(v)["error"] as? [String: Any])
        #expect(error["code"] as? String == "truncated")
        #expect(try parsed(v)["raw"] as? String == "030203")
    }

    /// A Beurer BM85 puts pulse and status big-endian: the quirk reads them right.
    @Test func aQuirkChangesTheLayout() throws {
        let value = bytes("14 80 00 55 00 65 00 00 48 02 00 04")
        #expect(try parsed(CuffDecoder.decode(value, quirk: .beurerBM85))["pulse_rate"] as? Double == 72)
        #expect(try parsed(CuffDecoder.decode(value))["pulse_rate"] as? Double != 72)
    }

    /// Every measurement a replayed capture gave decodes, on its own, to the object inside its record.
    @Test func aReplayedMeasurementsValueDecodesToItsRecordsObject() throws {
        let replayed = try CuffReplay.replay(path: capturesDirectory.appendingPathComponent("multi-user.btsnoop").path)
        #expect(!replayed.measurements.isEmpty)
        for m in replayed.measurements where m.characteristic == .bloodPressureMeasurement {
            #expect(CuffDecoder.decode(m.raw).json == m.decoded)
        }
    }

    /// hass-omron's HEM-7142T2 slot: 126/88 mmHg, pulse 84, 2026-06-17 19:35:30.
    @Test func anOmronRecordOfAModel() throws {
        let v = try CuffDecoder.decode(omronRecord: bytes("6558541a331ade1800004c00ba00"), model: "HEM-7142T2")
        #expect(v.failure == nil)
        let j = try parsed(v)
        #expect(j["systolic"] as? Double == 126)
        #expect(j["diastolic"] as? Double == 88)
        #expect(j["pulse_rate"] as? Double == 84)
        #expect(j["timestamp"] as? String == "2026-06-17T19:35:30")
        let empty = try CuffDecoder.decode(omronRecord: [UInt8](repeating: 0xFF, count: 14), model: "HEM-7142T2")
        #expect(empty.failure?.code == "empty_record")
        let unknown = #expect(throws: OmronError.self) { try CuffDecoder.decode(omronRecord: [0], model: "HEM-0000X") }
        #expect(unknown?.code == .unknownModel)
    }

    /// derdilla/blood-pressure-monitor-fl's vectors: a Microlife frame with two records and an
    /// empty slot, a Yonker result notification.
    @Test func vendorFrames() throws {
        let empty = [UInt8](repeating: 0, count: 10)
        let payload =
            [UInt8](repeating: 0, count: 38) + [120, 80, 60, 24, 6, 15, 14, 30, 0, 0] + empty
            + [130, 85, 70, 25, 1, 2, 3, 4, 0, 0]
        let length = UInt16(payload.count + 1)
        var frame: [UInt8] = [77, 58, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
        frame.append(Microlife.checksum(frame))
        let records = CuffDecoder.decode(frame: frame, protocol: .microlife)
        #expect(records.count == 2)
        #expect(try records.map { try parsed($0)["systolic"] as? Int } == [120, 130])
        #expect(try parsed(records[0])["timestamp"] as? String == "2024-06-15T14:30:00")
        // The empty slot between them, as `cuff decode` reports it on stderr.
        let decoded = CuffDecoder.decodeFrame(frame, protocol: .microlife)
        #expect(decoded.values == records)
        #expect(decoded.skipped.map(\.payloadOffset) == [48])
        #expect(decoded.skipped.map(\.reason) == [.empty])
        frame[frame.count - 1] &+= 1
        #expect(CuffDecoder.decodeFrame(frame, protocol: .microlife).skipped.isEmpty)
        #expect(CuffDecoder.decode(frame: frame, protocol: .microlife).map { $0.failure != nil } == [true])

        let yonker = CuffDecoder.decode(frame: bytes("81 83 67 51 00 00 19 0B 18 13 12 00 00 00 00"), protocol: .yonker)
        #expect(yonker.count == 1)
        let y = try parsed(yonker[0])
        #expect(y["systolic"] as? Int == 131)
        #expect(y["diastolic"] as? Int == 103)
        #expect(y["pulse_rate"] as? Int == 81)
        #expect(CuffDecoder.decode(frame: bytes("81 83 67"), protocol: .yonker).first?.failure?.code == "truncated")
    }
}
