import Foundation
import Testing
@testable import CuffCore

@Suite("Byte reader and writer")
struct ByteReaderTests {
    @Test func littleEndianFieldsAndOffsets() {
        var r = ByteReader([0x01, 0x34, 0x12, 0x56, 0x34, 0x12, 0x78, 0x56, 0x34, 0x12, 0xFF])
        #expect(r.readUInt8() == 0x01)
        #expect(r.readUInt16() == 0x1234)
        #expect(r.offset == 3)
        #expect(r.readUInt24() == 0x123456)
        #expect(r.readUInt32() == 0x1234_5678)
        #expect(r.remaining == 1)
        // Too few bytes: nil, and nothing consumed.
        #expect(r.readUInt16() == nil)
        #expect(r.offset == 10)
        #expect(r.readUInt8() == 0xFF)
        #expect(r.isAtEnd)
        #expect(r.readUInt8() == nil)
    }

    @Test func bigEndianAndSlicesKeepOffsetsFromTheirStart() {
        let whole: [UInt8] = [0xAA, 0x12, 0x34, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2A]
        var r = ByteReader(whole[1...])
        #expect(r.offset == 0)
        #expect(r.readUInt16BigEndian() == 0x1234)
        #expect(r.readUInt64BigEndian() == 0x2A)
        #expect(r.isAtEnd)
        var s = ByteReader([1, 2, 3])
        #expect(s.readBytes(4) == nil)
        let skipped = s.skip(1)
        #expect(skipped)
        #expect(Array(s.readRemaining()) == [2, 3])
    }

    @Test func writerRoundTrip() {
        var w = ByteWriter()
        w.write(UInt8(7))
        w.write(UInt16(0xBEEF))
        w.writeUInt24(0x010203)
        w.write(UInt32(0xDEAD_BEEF))
        w.write(UInt64(42))
        w.writeBigEndian(UInt16(0x0102))
        var r = ByteReader(w.bytes)
        #expect(r.readUInt8() == 7)
        #expect(r.readUInt16() == 0xBEEF)
        #expect(r.readUInt24() == 0x010203)
        #expect(r.readUInt32() == 0xDEAD_BEEF)
        #expect(r.readUInt64() == 42)
        #expect(r.readUInt16BigEndian() == 0x0102)
        #expect(r.isAtEnd)
    }
}

@Suite("Hex")
struct HexTests {
    @Test(arguments: ["1E 8A 00", "1e:8a:00", "1e8a00", "0x1E8A00", "0x1E 0x8A 0x00", "1e-8a-00"])
    func separators(text: String) {
        #expect(Hex.decode(text) == [0x1E, 0x8A, 0x00])
    }

    /// Each refusal with where it is (a UTF-8 byte offset): the first character that is no hex
    /// digit, a separator splitting a byte, or the last digit of an odd count.
    @Test(arguments: [
        ("1", 0), ("1e8", 2), ("zz", 0), ("1 e", 1), ("1e 8a 0", 6), ("1e 8a 00 5g 00", 10), ("1e8aé0", 4),
        ("0x1E 0xZZ", 7), ("00" + String(repeating: "11", count: 100) + "!", 202),
    ])
    func rejectsWhatIsNotBytes(text: String, at offset: Int) {
        #expect(Hex.decode(text) == nil)
        #expect(Hex.problemOffset(text) == offset)
    }

    @Test func hexHasNoProblemOffset() {
        #expect(Hex.problemOffset("1e 8a 00") == nil)
        #expect(Hex.problemOffset("") == nil)
    }

    @Test func encodeIsLowercase() {
        #expect(Hex.encode([0x00, 0xAB, 0xFF]) == "00abff")
        #expect(Hex.decode("") == [])
        // Bytes not in contiguous memory (a range), a slice, nothing at all.
        #expect(Hex.encode(UInt8(0x0E)...UInt8(0x11)) == "0e0f1011")
        #expect(Hex.encode([0x01, 0x9C, 0xF0, 0x7A][1...2]) == "9cf0")
        #expect(Hex.encode([UInt8]()) == "")
    }
}

@Suite("JSON writer")
struct JSONTests {
    @Test func keysKeepTheirOrderAndStringsAreEscaped() {
        let j = JSON.object([
            ("b", .int(1)), ("a", .string("q\"\\\n\u{01}é")), ("c", .array([.null, .bool(true), .double(18.9)])),
        ])
        #expect(j.serialized() == #"{"b":1,"a":"q\"\\\n\u0001é","c":[null,true,18.9]}"#)
        // Foundation reads back what we wrote.
        let back = try? JSONSerialization.jsonObject(with: Data(j.serialized().utf8)) as? [String: Any]
        #expect(back?["a"] as? String == "q\"\\\n\u{01}é")
    }

    @Test func numbersAlwaysLookLikeNumbersAndNonFiniteNeverDoes() {
        #expect(JSON.double(127).serialized() == "127.0")
        #expect(JSON.double(0.00001).serialized() == "1e-05")
        #expect(JSON.double(.nan).serialized() == "null")
        #expect(JSON.double(.infinity).serialized() == "null")
    }

    @Test func prettyIndentsByTwo() {
        #expect(JSON.object([("a", .array([.int(1)]))]).serialized(pretty: true) == "{\n  \"a\": [\n    1\n  ]\n}")
    }
}

@Suite("Time values and math")
struct TimeAndMathTests {
    @Test func timestampArithmetic() {
        let t = Timestamp.seconds(1.5)
        #expect(t + .milliseconds(500) == .seconds(2))
        #expect((Timestamp.seconds(2) - t) == .milliseconds(500))
        #expect(Duration.seconds(3).nanoseconds == 3_000_000_000)
    }

    @Test func sineMatchesTheCLibrary() {
        var g = SeededRandom(seed: 3)
        for _ in 0..<10_000 {
            let x = Double.random(in: -1000...1000, using: &g)
            #expect(abs(PureMath.sin(x) - Foundation.sin(x)) < 1e-9, "x = \(x)")
        }
    }

    @Test func seededRandomIsReproducible() {
        var a = SeededRandom(seed: 9), b = SeededRandom(seed: 9), c = SeededRandom(seed: 10)
        let xa = (0..<8).map { _ in a.next() }, xb = (0..<8).map { _ in b.next() }, xc = (0..<8).map { _ in c.next() }
        #expect(xa == xb)
        #expect(xa != xc)
    }
}

/// Timestamps at the ends of the 64-bit range: sums and differences saturate, floors never overflow.
@Suite("Timestamp extremes")
struct TimestampExtremeTests {
    @Test func arithmeticSaturatesAndFloorsHoldForAnyValue() {
        let lo = Timestamp(nanoseconds: .min), hi = Timestamp(nanoseconds: .max)
        #expect((hi + .seconds(2)).nanoseconds == .max)
        #expect((lo + .seconds(-2)).nanoseconds == .min)
        #expect((hi - lo).nanoseconds == .max)
        #expect((lo - hi).nanoseconds == .min)
        #expect((hi - Timestamp(nanoseconds: 1)).nanoseconds == .max - 1)
        #expect(lo.flooredMicroseconds == Int64.min / 1000 - 1)
        #expect(Timestamp(nanoseconds: -1).flooredMicroseconds == -1)
        #expect(Timestamp(nanoseconds: 1999).flooredMicroseconds == 1)
        #expect(Timestamp.seconds(.infinity).nanoseconds == .max)
        #expect(Timestamp.seconds(-.infinity).nanoseconds == .min)
        #expect(Timestamp.seconds(.nan).nanoseconds == 0)
        #expect(Timestamp.seconds(1.5).nanoseconds == 1_500_000_000)
        #expect(Timestamp.milliseconds(.max).nanoseconds == .max)
    }
}
