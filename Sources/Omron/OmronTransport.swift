// SPDX-License-Identifier: GPL-2.0-or-later

/// The two ways an Omron cuff carries frames (facts sheet §1).
public enum OmronTransport: String, Sendable, Hashable, CaseIterable {
    /// Service ecbe3980…, four 16-byte TX and four RX channels, unlock characteristic.
    case classic
    /// Service 0xFE4A, one TX (write without response) and one RX channel.
    case modern

    public var serviceUUID: String {
        switch self {
        case .classic: OmronUUID.classicService
        case .modern: OmronUUID.modernService
        }
    }

    /// TX characteristics (host writes), in channel order.
    public var txUUIDs: [String] { self == .classic ? OmronUUID.classicTX : [OmronUUID.classicTX[0]] }
    /// RX characteristics (cuff notifies), in channel order.
    public var rxUUIDs: [String] { self == .classic ? OmronUUID.classicRX : [OmronUUID.classicRX[0]] }
    public var channelCount: Int { self == .classic ? 4 : 1 }
    /// Bytes one write or notification carries.
    public var pieceSize: Int { self == .classic ? 16 : OmronFrame.maxLength }

    /// A frame cut into (channel, bytes) pieces: 16 bytes per channel on classic, one piece on modern.
    public func split(_ frame: [UInt8]) -> [(channel: Int, bytes: [UInt8])] {
        guard self == .classic else { return [(0, frame)] }
        var out: [(Int, [UInt8])] = []
        var i = 0
        while i < frame.count {
            out.append((out.count, Array(frame[i..<min(i + 16, frame.count)])))
            i += 16
        }
        return out
    }
}

/// The UUIDs, as lowercase 128-bit strings.
public enum OmronUUID {
    public static let classicService = "ecbe3980-c9a2-11e1-b1bd-0002a5d5c51b"
    public static let modernService = "0000fe4a-0000-1000-8000-00805f9b34fb"
    public static let classicTX = [
        "db5b55e0-aee7-11e1-965e-0002a5d5c51b", "e0b8a060-aee7-11e1-92f4-0002a5d5c51b",
        "0ae12b00-aee8-11e1-a192-0002a5d5c51b", "10e1ba60-aee8-11e1-89e5-0002a5d5c51b",
    ]
    public static let classicRX = [
        "49123040-aee8-11e1-a74d-0002a5d5c51b", "4d0bf320-aee8-11e1-a0d9-0002a5d5c51b",
        "5128ce60-aee8-11e1-b84b-0002a5d5c51b", "560f1420-aee8-11e1-8184-0002a5d5c51b",
    ]
    public static let unlock = "b305b680-aee7-11e1-a730-0002a5d5c51b"
    /// AFib models' extra notify characteristic (content undocumented).
    public static let afib = "8858eb40-aee8-11e1-bb67-0002a5d5c51b"
    /// Omron Healthcare's Bluetooth company id.
    public static let companyID: UInt16 = 0x020E
}

/// Puts frames back together from channel pieces (§4.3).
///
/// Classic: channel 0 starts a frame (any partial one is dropped), its first byte is L, and
/// ceil(L/16) channels follow in order. Modern: one piece holds the whole frame.
public struct OmronReassembler: Sendable, Hashable {
    public let transport: OmronTransport
    private var partial: [UInt8] = []
    private var expected = 0
    private var nextChannel = 0

    public init(transport: OmronTransport) { self.transport = transport }

    public var isIdle: Bool { partial.isEmpty }

    /// Feeds one piece; returns the frame's bytes (cut at L) when it is complete.
    public mutating func receive(channel: Int, _ bytes: [UInt8]) throws(OmronError) -> [UInt8]? {
        if channel == 0 {
            partial = []
            guard let l = bytes.first else { throw .truncated("length", at: 0, need: 1, have: 0) }
            guard l >= 8, Int(l) <= OmronFrame.maxLength else {
                throw OmronError(.invalidLength, field: "length", offset: 0, detail: "\(l); a frame has 8 to 64 bytes")
            }
            expected = Int(l)
            nextChannel = 0
        } else if partial.isEmpty || channel != nextChannel {
            let was = nextChannel
            partial = []
            throw OmronError(.outOfOrder, field: "RX channel \(channel)", offset: 0, detail: "expected channel \(was)")
        }
        let want = min(transport.pieceSize, expected - partial.count)
        if bytes.count < want {
            let at = partial.count + bytes.count
            partial = []
            throw .truncated("channel \(channel) piece", at: at, need: want, have: bytes.count)
        }
        partial.append(contentsOf: bytes.prefix(want))
        nextChannel = channel + 1
        guard partial.count == expected else {
            if transport == .modern { partial = [] }  // unreachable: one piece carries L bytes
            return nil
        }
        defer { partial = [] }
        return partial
    }
}
