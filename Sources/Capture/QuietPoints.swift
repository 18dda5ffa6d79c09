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
/// - it closes only on a well-formed Disconnection Complete with status 0, on which both the
///   extractor and the replay forget the connection (they also forget the links of a controller
///   btmon's Delete Index removed; the scanner keeps those open, which costs only quiet points).
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
    public mutating func step(_ bytes: UnsafeRawBufferPointer) -> Step { look(bytes) }

    /// ``step(_:)`` over `bytes` from `start` (the start of a record), record after record, in one
    /// loop: `quiet` gets the offset in `bytes` after each record after which no connection can
    /// be open. Returns where it stopped (the start of the first record not whole in `bytes`) and
    /// whether that record's header is one no reader gets past (``Step/stop``).
    public mutating func scan(_ bytes: UnsafeRawBufferPointer, from start: Int, quiet: (Int) -> Void) -> (
        end: Int, stop: Bool
    ) {
        guard let base = bytes.baseAddress else { return (start, false) }
        let count = bytes.count
        var at = start
        while true {
            // A btmon file's commonest record, ACL data on a connection already open, in a few
            // loads: it changes nothing and nothing is quiet after it (what ``look(_:)`` decides
            // for it too, some 25 instructions a record later; the rest go there).
            if datalink == .monitor, count - at >= BTSnoop.recordHeaderLength, !open.isEmpty {
                let header = BTSnoop.RecordHeader(
                    loading: UnsafeRawBufferPointer(start: base + at, count: BTSnoop.recordHeaderLength))
                let included = Int(header.includedLength)
                let total = BTSnoop.recordHeaderLength + included
                let opcode = header.flags & 0xFFFF
                if (opcode == 4 || opcode == 5), included >= 2, included <= HCIRecord.maximumPayloadLength,
                    count - at >= total
                {
                    let body = UnsafeRawBufferPointer(start: base + at + BTSnoop.recordHeaderLength, count: included)
                    if open.contains(Self.key(header.flags >> 16, body, at: 0)) {
                        at += total
                        continue
                    }
                }
            }
            switch look(UnsafeRawBufferPointer(start: base + at, count: count - at)) {
            case let .record(length, isQuiet):
                at += length
                if isQuiet { quiet(at) }
            case .need:
                return (at, false)
            case .stop:
                return (at, true)
            }
        }
    }

    @inline(__always) private mutating func look(_ bytes: UnsafeRawBufferPointer) -> Step {
        guard bytes.count >= BTSnoop.recordHeaderLength else { return .need(count: BTSnoop.recordHeaderLength) }
        let header = BTSnoop.RecordHeader(loading: bytes)
        let included = Int(header.includedLength)
        guard included <= HCIRecord.maximumPayloadLength else { return .stop }
        let total = BTSnoop.recordHeaderLength + included
        guard bytes.count >= total else { return .need(count: total) }
        // An empty H4 record has no packet type: the reader warns and nothing changes.
        guard datalink != .uart || included > 0 else { return .record(length: total, quiet: isQuiet) }
        // What the readers make of it (``RecordView``): only whether it is ACL data or an HCI
        // event, its controller and its payload (no other kinds).
        let body = UnsafeRawBufferPointer(rebasing: bytes[BTSnoop.recordHeaderLength..<total])
        let flags = header.flags
        let isACL: Bool, isEvent: Bool
        var adapter: UInt32 = 0
        var payload = body
        switch datalink {
        case .hci:
            isACL = flags & 2 == 0
            isEvent = flags & 3 == 3  // a command packet, received: an event
        case .uart:
            isACL = body[0] == HCIPacketKind.H4Type.acl
            isEvent = body[0] == HCIPacketKind.H4Type.event
            payload = UnsafeRawBufferPointer(rebasing: body[1...])
        case .monitor:
            let opcode = flags & 0xFFFF  // as HCIPacketKind.fromMonitor reads it
            isACL = opcode == 4 || opcode == 5
            isEvent = opcode == 3
            adapter = flags >> 16
        }
        if isACL, payload.count >= 2 {
            // ACL data on a connection already open (most records) changes nothing, whatever
            // its timestamp: only one that opens one needs a timestamp the reader takes.
            let key = Self.key(adapter, payload, at: 0)
            if open.contains(key) { return .record(length: total, quiet: false) }
            if Self.usable(header) { note(key, opening: true) }
        } else if isEvent, payload.count >= 2 && payload.count - 2 >= Int(payload[1]), Self.usable(header) {
            // Parameters as the event's own length gives them (the extractor reads no further).
            let length = Int(payload[1])
            switch payload[0] {
            case 0x05 where length >= 4 && payload[2] == 0:  // Disconnection Complete, status 0
                note(Self.key(adapter, payload, at: 3), opening: false)
            case 0x3E where length >= 4:
                switch payload[2] {
                // LE (Enhanced) Connection Complete
                case 0x01, 0x0A, 0x29: note(Self.key(adapter, payload, at: 4), opening: true)
                default: break
                }
            default:
                break
            }
        }
        return .record(length: total, quiet: isQuiet)
    }

    /// A record whose timestamp the reader takes (one it rejects, `bad_timestamp`, is skipped:
    /// nothing changes).
    @inline(__always) private static func usable(_ header: BTSnoop.RecordHeader) -> Bool {
        BTSnoop.usableTimestamp(fromBTSnoop: header.timestamp) != nil
    }

    /// `adapter << 16 | handle` of the connection whose 12-bit handle is the little-endian word at `at`.
    @inline(__always) private static func key(_ adapter: UInt32, _ bytes: UnsafeRawBufferPointer, at: Int) -> UInt32 {
        adapter << 16 | (UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8) & 0x0FFF
    }

    /// Opens or closes the connection `key`.
    private mutating func note(_ key: UInt32, opening: Bool) {
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
