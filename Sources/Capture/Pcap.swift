// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// Classic libpcap files: constants and pure header codecs.
///
/// Global header (24 bytes, in the writer's byte order): magic, major, minor, thiszone, sigfigs,
/// snaplen, network. Record header (16 bytes): seconds, µs or ns, included length, original length.
enum Pcap {
    static let microsecondMagic: UInt32 = 0xA1B2_C3D4
    static let nanosecondMagic: UInt32 = 0xA1B2_3C4D
    static let fileHeaderLength = 24
    static let recordHeaderLength = 16

    struct FileHeader {
        var bigEndian: Bool
        var nanoseconds: Bool
        var linkType: UInt32
    }

    /// True if the first four bytes are any pcap magic.
    static func isMagic(_ b: ArraySlice<UInt8>) -> Bool {
        guard b.count >= 4 else { return false }
        var r = ByteReader(b)
        let be = r.readUInt32BigEndian()!
        return [microsecondMagic, nanosecondMagic, microsecondMagic.byteSwapped, nanosecondMagic.byteSwapped].contains(
            be)
    }

    static func parseFileHeader(_ bytes: ArraySlice<UInt8>) throws(CaptureError) -> FileHeader {
        var r = ByteReader(bytes)
        let magic = r.readUInt32BigEndian()!
        let bigEndian: Bool
        let ns: Bool
        switch magic {
        case microsecondMagic: (bigEndian, ns) = (true, false)
        case nanosecondMagic: (bigEndian, ns) = (true, true)
        case microsecondMagic.byteSwapped: (bigEndian, ns) = (false, false)
        case nanosecondMagic.byteSwapped: (bigEndian, ns) = (false, true)
        default:
            throw CaptureError(
                .badMagic,
                "expected pcap magic a1b2c3d4 or a1b23c4d in either byte order, found \(Hex.encode(bytes.prefix(4)))",
                offset: 0)
        }
        let major = bigEndian ? r.readUInt16BigEndian()! : r.readUInt16()!
        guard major == 2 else {
            throw CaptureError(.unsupportedVersion, "expected pcap major version 2, found \(major)", offset: 4)
        }
        r.skip(2 + 4 + 4 + 4)  // minor, thiszone, sigfigs, snaplen
        let network = bigEndian ? r.readUInt32BigEndian()! : r.readUInt32()!
        let linkType = network & 0x0FFF_FFFF & 0xFFFF  // upper bits carry FCS info, not the type
        guard LinkType.supported.contains(linkType) else {
            throw CaptureError(.unknownDatalink, "expected link type 201, 254 or 256, found \(linkType)", offset: 20)
        }
        return FileHeader(bigEndian: bigEndian, nanoseconds: ns, linkType: linkType)
    }

    struct RecordHeader {
        var timestamp: Timestamp
        var includedLength: UInt32
        var originalLength: UInt32
    }

    static func parseRecordHeader(_ bytes: ArraySlice<UInt8>, _ h: FileHeader) -> RecordHeader {
        bytes.withUnsafeBytes { RecordHeader(loading: $0, h) }
    }
}

extension Pcap.RecordHeader {
    /// The record header in the first 16 bytes of `raw` (which must hold them).
    @inline(__always)
    init(loading raw: UnsafeRawBufferPointer, _ h: Pcap.FileHeader) {
        @inline(__always) func u32(_ at: Int) -> UInt32 {
            let v = raw.loadUnaligned(fromByteOffset: at, as: UInt32.self)
            return h.bigEndian ? UInt32(bigEndian: v) : UInt32(littleEndian: v)
        }
        let sec = Int64(u32(0))
        let frac = Int64(u32(4))
        self.init(
            timestamp: Timestamp(nanoseconds: sec * 1_000_000_000 + (h.nanoseconds ? frac : frac * 1000)),
            includedLength: u32(8), originalLength: u32(12))
    }
}
