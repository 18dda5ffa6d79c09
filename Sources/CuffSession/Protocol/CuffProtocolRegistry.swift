// SPDX-License-Identifier: GPL-2.0-or-later
import GATT

/// The cuff protocols cuff knows, in order of preference: the one place a protocol is
/// registered, and the one place one is chosen for a device.
///
/// A value (no global state): ``builtIn`` is what the command line uses; a library user (or a
/// test) copies it and ``register(_:)``s its own, then passes it in
/// ``CuffSessionConfiguration/protocols``.
public struct CuffProtocolRegistry: Sendable {
    public private(set) var protocols: [any CuffProtocol]

    public init(_ protocols: [any CuffProtocol]) { self.protocols = protocols }

    /// Every protocol that ships with cuff. The first is the default: the one tried on a device
    /// no protocol recognises.
    public static let builtIn = CuffProtocolRegistry([
        StandardBPSProtocol(),
        OmronProtocol(),
        MicrolifeProtocol(),
        YonkerProtocol(),
    ])

    /// Adds `p`, or replaces the protocol registered under its id.
    public mutating func register(_ p: any CuffProtocol) {
        if let i = protocols.firstIndex(where: { $0.id == p.id }) {
            protocols[i] = p
        } else {
            protocols.append(p)
        }
    }

    public subscript(_ id: CuffProtocolID) -> (any CuffProtocol)? { protocols.first { $0.id == id } }

    /// The ids, in order (for `--protocol`'s help and its check).
    public var ids: [CuffProtocolID] { protocols.map(\.id) }

    /// The default protocol (the first registered).
    public var standard: any CuffProtocol { protocols.first ?? StandardBPSProtocol() }

    /// The protocol for a device: `forced` when given (and registered), else the best match for
    /// `offer`, else the default.
    public func select(_ offer: DeviceOffer, forced: CuffProtocolID? = nil) -> any CuffProtocol {
        if let forced, let p = self[forced] { return p }
        var best: (any CuffProtocol)?
        var bestMatch: ProtocolMatch?
        for p in protocols {
            guard let m = p.match(offer) else { continue }
            if bestMatch.map({ m > $0 }) ?? true {
                best = p
                bestMatch = m
            }
        }
        return best ?? standard
    }

    /// A stored record of a non-standard source, rebuilt by the protocol that names it (nil: none does).
    /// `userID` is the user the store kept beside the row.
    public func storedRecord(
        _ characteristic: RecordCharacteristic, raw: [UInt8], device: DeviceInfo, receivedAt: EventTime,
        stored: Bool, sequenceNumber: UInt16?, userID: UInt8? = nil
    ) -> MeasurementRecord? {
        for p in protocols {
            if let r = p.storedRecord(
                characteristic, raw: raw, device: device, receivedAt: receivedAt, stored: stored,
                sequenceNumber: sequenceNumber, userID: userID)
            {
                return r
            }
        }
        return nil
    }

    /// After discovery: the protocol that should follow a link `current` discovered, when one
    /// fits `offer` better than `current` does (nil: `current` carries on).
    public func handOver(from current: CuffProtocolID, _ offer: DeviceOffer) -> (any CuffProtocol)? {
        let chosen = select(offer)
        guard chosen.id != current else { return nil }
        let currentMatch = self[current]?.match(offer)
        guard let m = chosen.match(offer), currentMatch.map({ m > $0 }) ?? true else { return nil }
        return chosen
    }
}
