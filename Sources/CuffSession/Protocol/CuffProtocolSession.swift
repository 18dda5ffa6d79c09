// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import GATT

/// The link events a central session takes (a ``CuffProtocolSession``, and ``ProtocolSession``,
/// which drives one): each appends its actions to `out` (the ``ActionMachine`` convention).
public protocol CentralSessionEvents {
    /// The link is up: start the session.
    mutating func start(at: EventTime, into out: inout [CentralAction])
    /// An ATT PDU from the cuff.
    mutating func receive(_ pdu: [UInt8], at: EventTime, into out: inout [CentralAction])
    mutating func tick(at: EventTime, into out: inout [CentralAction])
    /// The link is gone (`why` when known).
    mutating func disconnected(_ why: String?, at: EventTime, into out: inout [CentralAction])
    /// The user asks to stop (Ctrl-C, `--stop-after`).
    mutating func stop(at: EventTime, into out: inout [CentralAction])
    mutating func securityRaised(_ level: SecurityLevel, at: EventTime, into out: inout [CentralAction])
    mutating func securityRefused(_ why: String, at: EventTime, into out: inout [CentralAction])
}

/// A cuff protocol's central side, as a value: link events in, ``CentralAction``s out.
///
/// Each event appends its actions to `out`, an array the driver owns and empties between events
/// with `removeAll(keepingCapacity: true)` (the ``ActionMachine`` convention), so an event
/// allocates no array of its own; the array-returning forms in the extension are for tests.
///
/// The standard Blood Pressure Service session (``CuffCentral``) is one; a vendor protocol is
/// another. A driver (``ProtocolSession`` inside `CentralConnection`, `SimulatedLink`) feeds it
/// the connection's ATT PDUs, the link's security changes, its end, a stop request and ticks at
/// ``nextDeadline``; time is always passed in. It owns whatever GATT client it uses, so the
/// services it discovers, the characteristics it subscribes to and the values it writes are its
/// own business: they leave as `.send` PDUs. (``GATTProtocolCentral`` does that part for a
/// protocol written against characteristic UUIDs.)
///
/// ### Implementers Notes
/// - Emit a `.session(.start)` record when the session starts and a `.session(.end)` one with
///   the outcome when it ends, as the standard session does; results as `.measurement`, the cuff
///   pressure as `.progress`.
/// - A session that discovered a database another protocol should follow sets ``handOver`` and
///   returns; its driver then starts that protocol with ``adopt(_:at:)``.
public protocol CuffProtocolSession: CentralSessionEvents, Sendable {
    /// The protocol this session speaks.
    var protocolID: CuffProtocolID { get }
    var isFinished: Bool { get }
    /// How it ended, once it has.
    var outcome: SessionOutcome? { get }
    /// The exit status of `cuff measure` for how the session went (0 with at least one result).
    var exitCode: Int32 { get }
    /// Results handed out so far.
    var measurements: Int { get }
    /// The earliest time the driver must call ``tick(at:)``.
    var nextDeadline: Timestamp? { get }
    /// Where the session is, for logs (`discovering`, `measuring (inflating)`).
    var stateName: String { get }

    /// Another protocol's session discovered this link and handed it over: carry on from there
    /// (the session's start record is already out).
    mutating func adopt(_ link: DiscoveredLink, at: EventTime, into out: inout [CentralAction])
    /// Set once this session found, on discovery, that another protocol should follow the link.
    var handOver: DiscoveredLink? { get }
    /// What the session learned about the cuff for the GATT cache (read at the end, kept by the
    /// edge); nil when it keeps none.
    var learned: LearnedCuff? { get }
    /// How the session used the GATT cache; nil for a protocol that has none.
    var gattCacheUse: GATTCacheUse? { get }
}

extension CuffProtocolSession {
    public var handOver: DiscoveredLink? { nil }
    public var learned: LearnedCuff? { nil }
    public var gattCacheUse: GATTCacheUse? { nil }

    /// By default a session cannot take a link over: it ends with `service_missing`.
    public mutating func adopt(_ link: DiscoveredLink, at: EventTime, into out: inout [CentralAction]) {
        let end = SessionRecord(
            event: .end, device: link.device, at: at, outcome: .serviceMissing,
            message: "the \(protocolID) protocol cannot take over a discovered link")
        out += [.emit(.session(end)), .disconnect, .finished(.serviceMissing)]
    }
}

/// The array-returning forms (tests, and drivers off the hot path): each is its `into:` form
/// into a new array.
extension CentralSessionEvents {
    public mutating func start(at: EventTime) -> [CentralAction] {
        var out: [CentralAction] = []
        start(at: at, into: &out)
        return out
    }

    public mutating func receive(_ pdu: [UInt8], at: EventTime) -> [CentralAction] {
        var out: [CentralAction] = []
        receive(pdu, at: at, into: &out)
        return out
    }

    public mutating func tick(at: EventTime) -> [CentralAction] {
        var out: [CentralAction] = []
        tick(at: at, into: &out)
        return out
    }

    public mutating func disconnected(_ why: String?, at: EventTime) -> [CentralAction] {
        var out: [CentralAction] = []
        disconnected(why, at: at, into: &out)
        return out
    }

    public mutating func stop(at: EventTime) -> [CentralAction] {
        var out: [CentralAction] = []
        stop(at: at, into: &out)
        return out
    }

    public mutating func securityRaised(_ level: SecurityLevel, at: EventTime) -> [CentralAction] {
        var out: [CentralAction] = []
        securityRaised(level, at: at, into: &out)
        return out
    }

    public mutating func securityRefused(_ why: String, at: EventTime) -> [CentralAction] {
        var out: [CentralAction] = []
        securityRefused(why, at: at, into: &out)
        return out
    }
}

extension CuffProtocolSession {
    /// ``adopt(_:at:into:)`` into a new array.
    public mutating func adopt(_ link: DiscoveredLink, at: EventTime) -> [CentralAction] {
        var out: [CentralAction] = []
        adopt(link, at: at, into: &out)
        return out
    }
}

/// A connection one protocol's session discovered and hands to another: the GATT client (its MTU
/// and any requests under way), what discovery found, and what is known of the device.
public struct DiscoveredLink: Sendable {
    /// The protocol to carry on with.
    public var protocolID: CuffProtocolID
    public var client: GATTClient
    public var profile: GATTProfile
    public var device: DeviceInfo
    /// When the session started.
    public var startedAt: EventTime
    /// The session handing the link over found the GATT cache wrong (the entry was another
    /// cuff's): the adopting session's end record says `stale`.
    public var gattCacheProvedStale = false

    public init(
        protocolID: CuffProtocolID, client: GATTClient, profile: GATTProfile, device: DeviceInfo, startedAt: EventTime
    ) {
        self.protocolID = protocolID
        self.client = client
        self.profile = profile
        self.device = device
        self.startedAt = startedAt
    }
}
