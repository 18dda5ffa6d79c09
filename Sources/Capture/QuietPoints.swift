// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// Finds the places in a btsnoop record stream where no connection can be open, so that a
/// ``CaptureReplay`` started afresh there gives exactly what the replay of the whole stream gives
/// from there on (what lets `cuff replay` split a long capture between threads).
///
/// A replay's state between records is its open connections (and the extractor's links, a subset
/// of them); with none open it holds nothing a fresh replay lacks but counters. This scanner keeps
/// a superset of the open connections, from record headers and a few payload bytes:
/// - a (controller, handle) opens on any LE (Enhanced) Connection Complete naming it (whatever its
///   status) and on any ACL traffic on it — a replay opens a connection on the first only when it
///   succeeded, on the second only for ATT it can place, so it never has one the scanner lacks;
/// - it closes only on a well-formed Disconnection Complete with status 0, the one event on which
///   both the extractor and the replay forget the connection.
/// Anything the scanner cannot read (a cut header, a short event) changes nothing, as it changes
/// nothing in the extractor either. A point after a record with nothing open is quiet.
///
/// Pure: feed the bytes after the file header, in order, through ``step(_:)``.
public struct QuietPoints: Sendable {
    public let datalink: BTSnoopDatalink
    /// `adapter << 16 | handle` of each connection that may be open (a handful in practice).
    private var open: [UInt32] = []
    /// More than ``maximumOpen`` at once: the scanner stops tracking and no later point is quiet
    /// (a linear list stays cheap, and a hostile file cannot make it grow without bound).
    private var saturated = false
    public static let maximumOpen = 256

    public init(datalink: BTSnoopDatalink) { self.datalink = datalink }

    /// True when no connection can be open.
    public var isQuiet: Bool { open.isEmpty && !saturated }

    public enum Step: Sendable, Equatable {
        /// A whole record of `length` bytes; `quiet` after it.
        case record(length: Int, quiet: Bool)
        /// The record runs past the bytes given: call again with at least `count` bytes (or the stream ends there).
        case need(count: Int)
        /// A record header a reader rejects outright (an included length past
        /// ``HCIRecord/maximumPayloadLength``): nothing after it can be read.
        case stop
    }

    /// Looks at the record at the start of `bytes`.
    public mutating func step(_ bytes: UnsafeRawBufferPointer) -> Step {
        let header = BTSnoop.recordHeaderLength
        guard bytes.count >= header else { return .need(count: header) }
        func be32(_ at: Int) -> UInt32 { UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt32.self)) }
        let included = Int(be32(4))
        guard included <= HCIRecord.maximumPayloadLength else { return .stop }
        let total = header + included
        guard bytes.count >= total else { return .need(count: total) }
        let flags = be32(8)
        var body = UnsafeRawBufferPointer(rebasing: bytes[header..<total])
        let kind: HCIPacketKind
        var adapter: UInt32 = 0
        switch datalink {
        case .hci:
            kind = flags & 2 == 0 ? .aclData : (flags & 1 == 0 ? .command : .event)
        case .uart:
            guard let type = body.first else { return .record(length: total, quiet: isQuiet) }
            kind = .fromH4(type: type)
            body = UnsafeRawBufferPointer(rebasing: body[1...])
        case .monitor:
            kind = HCIPacketKind.fromMonitor(opcode: UInt16(truncatingIfNeeded: flags)).0
            adapter = flags >> 16
        }
        switch kind {
        case .aclData where body.count >= 2:
            note(adapter, body, at: 0, opening: true)
        case .event where body.count >= 2 && body.count - 2 >= Int(body[1]):
            // Parameters as the event's own length gives them (the extractor reads no further).
            let params = UnsafeRawBufferPointer(rebasing: body[2..<(2 + Int(body[1]))])
            switch body[0] {
            case 0x05 where params.count >= 4 && params[0] == 0:  // Disconnection Complete, status 0
                note(adapter, params, at: 1, opening: false)
            case 0x3E where params.count >= 4 && [0x01, 0x0A, 0x29].contains(params[0]):  // LE (Enhanced) Connection Complete
                note(adapter, params, at: 2, opening: true)
            default:
                break
            }
        default:
            break
        }
        return .record(length: total, quiet: isQuiet)
    }

    /// Opens or closes the connection whose 12-bit handle is the little-endian word at `at`.
    private mutating func note(_ adapter: UInt32, _ bytes: UnsafeRawBufferPointer, at: Int, opening: Bool) {
        let key = adapter << 16 | (UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8) & 0x0FFF
        if let i = open.firstIndex(of: key) {
            if !opening { open.remove(at: i) }
        } else if opening && !saturated {
            open.append(key)
            if open.count > Self.maximumOpen {
                saturated = true
                open = []
            }
        }
    }
}
