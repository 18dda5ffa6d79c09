// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// pcapng: block constants and pure block-body codecs.
///
/// Every block: type (4), total length (4), body, total length again (4), in the section's byte
/// order, which the Section Header Block's byte-order magic 0x1A2B3C4D fixes.
enum Pcapng {
    static let sectionHeaderType: UInt32 = 0x0A0D_0D0A
    static let interfaceDescriptionType: UInt32 = 1
    static let simplePacketType: UInt32 = 3
    /// The obsolete Packet Block: an Enhanced Packet Block with a 2-byte interface id and a
    /// 2-byte drops count where the EPB has a 4-byte id (old writers; Wireshark still reads it).
    static let obsoletePacketType: UInt32 = 2
    static let enhancedPacketType: UInt32 = 6
    static let byteOrderMagic: UInt32 = 0x1A2B_3C4D
    /// Largest block we buffer: a maximal packet plus EPB fields and generous options.
    static let maximumBufferedBlock = HCIRecord.maximumPayloadLength + 64 * 1024

    struct Interface {
        var linkType: UInt32
        var snapLength: UInt32
        /// Ticks per second numerator/denominator: timestamp units are 10^-n or 2^-n seconds.
        var resolution: Resolution = .decimal(6)
        var offsetSeconds: Int64 = 0

        enum Resolution { case decimal(Int), binary(Int) }

        /// `10^-6 s`, `2^-10 s`.
        var resolutionText: String {
            switch resolution {
            case .decimal(let n): "10^-\(n) s"
            case .binary(let n): "2^-\(n) s"
            }
        }

        /// The instant of `ticks` (plus `if_tsoffset`), or nil when it lies outside what a
        /// ``Timestamp`` holds (1677-09-21 to 2262-04-11): the reader skips the packet with `bad_timestamp`.
        func timestamp(ticks: UInt64) -> Timestamp? {
            var ns: UInt64
            switch resolution {
            case .decimal(let n) where n <= 9:
                var mul: UInt64 = 1
                for _ in 0..<(9 - n) { mul *= 10 }
                let (v, o) = ticks.multipliedReportingOverflow(by: mul)
                guard !o else { return nil }
                ns = v
            case .decimal(let n):
                var div: UInt64 = 1
                for _ in 0..<min(n - 9, 19) { div *= 10 }
                ns = ticks / div
            case .binary(let n):
                let full = ticks.multipliedFullWidth(by: 1_000_000_000)
                let shift = UInt64(min(n, 127))
                if shift >= 64 {
                    ns = shift >= 128 ? 0 : full.high >> (shift - 64)
                } else if shift == 0 {
                    guard full.high == 0 else { return nil }
                    ns = full.low
                } else {
                    guard full.high >> shift == 0 else { return nil }
                    ns = (full.low >> shift) | (full.high << (64 - shift))
                }
            }
            guard ns <= UInt64(Int64.max) else { return nil }
            let (offset, o1) = offsetSeconds.multipliedReportingOverflow(by: 1_000_000_000)
            let (sum, o2) = Int64(ns).addingReportingOverflow(offset)
            return o1 || o2 ? nil : Timestamp(nanoseconds: sum)
        }
    }

    struct Endian {
        var big: Bool
        func u16(_ r: inout ByteReader) -> UInt16? { big ? r.readUInt16BigEndian() : r.readUInt16() }
        func u32(_ r: inout ByteReader) -> UInt32? { big ? r.readUInt32BigEndian() : r.readUInt32() }
        func u64(_ r: inout ByteReader) -> UInt64? { big ? r.readUInt64BigEndian() : r.readUInt64() }
    }

    /// Parses an IDB body (after type and length, before the trailing length).
    static func parseInterface(_ body: ArraySlice<UInt8>, _ e: Endian, offset: Int64) throws(CaptureError) -> Interface
    {
        var r = ByteReader(body)
        guard let linkType = e.u16(&r), r.skip(2), let snap = e.u32(&r) else {
            throw CaptureError(
                .truncatedRecord, "expected an Interface Description Block with link type and snap length",
                offset: offset)
        }
        var interface = Interface(linkType: UInt32(linkType), snapLength: snap)
        // Options: code (2), length (2), value padded to 4; opt_endofopt = 0.
        while let code = e.u16(&r), let length = e.u16(&r) {
            if code == 0 { break }
            guard let value = r.readBytes(Int(length)) else { break }
            r.skip((4 - Int(length) % 4) % 4)
            var v = ByteReader(value)
            switch code {
            case 9:  // if_tsresol
                if let b = v.readUInt8() {
                    interface.resolution = b & 0x80 == 0 ? .decimal(Int(b & 0x7F)) : .binary(Int(b & 0x7F))
                }
            case 14:  // if_tsoffset
                if let s = e.u64(&v) { interface.offsetSeconds = Int64(bitPattern: s) }
            default: break
            }
        }
        return interface
    }
}
