// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// The central session a driver runs: the protocol the registry chose for the device, and the
/// one it hands over to when discovery shows a better fit.
///
/// Drivers (`CentralConnection`, `SimulatedLink`) hold this and never name a protocol. The
/// protocol is chosen from ``CuffSessionConfiguration/forcedProtocol`` (`--protocol`), else
/// from what the device advertised (``CuffSessionConfiguration/offer``); after discovery the
/// session may hand the link to another protocol (``CuffProtocolSession/handOver``), which then
/// carries on with the same GATT client. A cuff the GATT cache knows is matched on its kept
/// database instead, so its protocol's session starts at once.
public struct ProtocolSession: Sendable {
    public private(set) var session: any CuffProtocolSession
    let registry: CuffProtocolRegistry
    let configuration: CuffSessionConfiguration

    public init(configuration: CuffSessionConfiguration) {
        registry = configuration.protocols
        self.configuration = configuration
        var offer = configuration.offer
        // A cuff the GATT cache knows: its kept database chooses the protocol, as discovery's
        // would, so a known vendor cuff's session starts at once (no standard discovery first).
        if offer.profile == nil,
            let known = GATTCacheState(configuration.gattCache, address: configuration.address).known
        {
            offer.profile = known.profile
        }
        session = registry.select(offer, forced: configuration.forcedProtocol).makeCentral(
            configuration: configuration)
    }

    public var protocolID: CuffProtocolID { session.protocolID }
    public var isFinished: Bool { session.isFinished }
    public var outcome: SessionOutcome? { session.outcome }
    public var exitCode: Int32 { session.exitCode }
    public var measurements: Int { session.measurements }
    public var nextDeadline: Timestamp? { session.nextDeadline }
    public var stateName: String { session.stateName }
    /// What the session learned for the GATT cache (``CuffProtocolSession/learned``).
    public var learned: LearnedCuff? { session.learned }
    /// How the session used the GATT cache, nil when its protocol has none.
    public var gattCache: GATTCacheUse? { session.gattCacheUse }

    public mutating func start(at: EventTime, into out: inout [CentralAction]) {
        session.start(at: at, into: &out)
        followed(at, &out)
    }
    public mutating func receive(_ pdu: [UInt8], at: EventTime, into out: inout [CentralAction]) {
        session.receive(pdu, at: at, into: &out)
        followed(at, &out)
    }
    public mutating func tick(at: EventTime, into out: inout [CentralAction]) {
        session.tick(at: at, into: &out)
        followed(at, &out)
    }
    public mutating func disconnected(_ why: String?, at: EventTime, into out: inout [CentralAction]) {
        session.disconnected(why, at: at, into: &out)
        followed(at, &out)
    }
    public mutating func stop(at: EventTime, into out: inout [CentralAction]) {
        session.stop(at: at, into: &out)
        followed(at, &out)
    }
    public mutating func securityRaised(_ level: SecurityLevel, at: EventTime, into out: inout [CentralAction]) {
        session.securityRaised(level, at: at, into: &out)
        followed(at, &out)
    }
    public mutating func securityRefused(_ why: String, at: EventTime, into out: inout [CentralAction]) {
        session.securityRefused(why, at: at, into: &out)
        followed(at, &out)
    }

    /// When the session handed the link over: what the next protocol's session does with it,
    /// after the actions already in `out`.
    mutating func followed(_ at: EventTime, _ out: inout [CentralAction]) {
        // A session that adopts a link may give it on at once (an Omron cuff of an unknown model
        // back to the standard session); a few hops at most, never a loop.
        for _ in 0..<4 {
            guard var link = session.handOver, let next = registry[link.protocolID] else { break }
            if session.gattCacheUse == .stale { link.gattCacheProvedStale = true }
            session = next.makeCentral(configuration: configuration)
            session.adopt(link, at: at, into: &out)
        }
    }
}

/// The array-returning forms come from ``CentralSessionEvents``.
extension ProtocolSession: CentralSessionEvents {}
