// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import GATT

/// A vendor-protocol session over GATT: ``MicrolifeSession`` or ``YonkerSession`` driving a
/// ``GATTClient``. Discovers the services, finds the vendor characteristics by UUID, and turns
/// the session's requests into ATT procedures and the cuff's notifications into events. Pure:
/// PDUs and time in; PDUs, readings and requests to the link out.
public struct VendorCentral: Sendable {
    public enum Session: Sendable {
        case microlife(MicrolifeSession)
        case yonker(YonkerSession)

        mutating func handle(_ e: VendorSessionEvent, into out: inout [VendorSessionAction]) {
            switch self {
            case var .microlife(s):
                defer { self = .microlife(s) }
                s.handle(e, into: &out)
            case var .yonker(s):
                defer { self = .yonker(s) }
                s.handle(e, into: &out)
            }
        }

        var nextDeadline: Timestamp? {
            switch self {
            case let .microlife(s): s.nextDeadline
            case let .yonker(s): s.nextDeadline
            }
        }
    }

    public enum Output: Sendable, Hashable {
        case send([UInt8])
        /// The cuff asks for more security: raise the link, then ``securityRaised(_:at:)`` or ``securityRefused(at:)``.
        case raiseSecurity(SecurityLevel)
        case emit(VendorReading)
        /// A standard measurement the cuff indicated unasked (``UninvitedIndication``): kept like
        /// a reading; the confirmation follows it.
        case measurement(MeasurementRecord)
        case log(String)
        case disconnect
        case finished(SessionOutcome)
    }

    enum Pending: Sendable, Hashable {
        case mtu, discovery, subscribe, write
    }

    public private(set) var session: Session
    public internal(set) var client = GATTClient()
    var profile: GATTProfile?
    var pending: [GATTRequestID: Pending] = [:]
    /// The value handles the session subscribed to: notifications from any other are not its cuff's answers.
    var subscribed: Set<UInt16> = []
    /// Whether a notification from another handle was said already (once per session).
    var saidStrayNotification = false
    public private(set) var outcome: SessionOutcome?
    /// The device the records of unasked standard measurements name.
    public var device: DeviceInfo
    /// The session's and the client's actions for one event, kept between events (emptied, their
    /// capacity kept: ``ActionMachine``); an event taken while another one's actions run gets a new array.
    var sessionScratch = ActionBuffer<VendorSessionAction>()
    var clientScratch = ActionBuffer<GATTClientAction>()

    public init(_ session: Session, device: DeviceInfo = DeviceInfo(address: "unknown")) {
        self.session = session
        self.device = device
    }

    public var nextDeadline: Timestamp? { [session.nextDeadline, client.nextDeadline].compactMap { $0 }.min() }

    /// The link is up: exchange the MTU and discover.
    public mutating func start(at: EventTime, into out: inout [Output]) {
        let now = at.monotonic
        request(.mtu, at, &out) { $0.exchangeMTU(now: now, into: &$1) }
        request(.discovery, at, &out) { $0.discover(services: [], now: now, into: &$1) }
    }

    /// Carries on with a link another session discovered: its client, its database.
    public mutating func adopt(client: GATTClient, profile: GATTProfile, at: EventTime, into out: inout [Output]) {
        self.client = client
        self.profile = profile
        sessionStep(.start(at), at, &out)
    }

    public mutating func securityRaised(_ level: SecurityLevel, at: EventTime, into out: inout [Output]) {
        let now = at.monotonic
        clientStep({ $0.securityRaised(level: level, now: now, into: &$1) }, at, &out)
    }
    public mutating func securityRefused(at: EventTime, into out: inout [Output]) {
        let now = at.monotonic
        clientStep({ $0.securityRefused(now: now, into: &$1) }, at, &out)
    }

    public mutating func receive(_ pdu: [UInt8], at: EventTime, into out: inout [Output]) {
        let now = at.monotonic
        clientStep({ $0.receive(pdu, now: now, into: &$1) }, at, &out)
    }
    public mutating func tick(at: EventTime, into out: inout [Output]) {
        let now = at.monotonic
        clientStep({ $0.tick(now: now, into: &$1) }, at, &out)
        sessionStep(.tick(at), at, &out)
    }
    public mutating func disconnected(at: EventTime, into out: inout [Output]) {
        sessionStep(.disconnected(at), at, &out)
    }

    /// The session takes `event` with ``sessionScratch`` (emptied; an event taken while another
    /// one's actions run gets a new array), and its actions run into `out`.
    mutating func sessionStep(_ event: VendorSessionEvent, _ at: EventTime, _ out: inout [Output]) {
        var actions = sessionScratch.take()
        session.handle(event, into: &actions)
        run(actions, at, &out)
        sessionScratch.giveBack(&actions)
    }

    /// Submits a GATT procedure with ``clientScratch``, notes what it is for, then runs its first
    /// actions into `out`.
    mutating func request(
        _ what: Pending, _ at: EventTime, _ out: inout [Output],
        _ submit: (inout GATTClient, inout [GATTClientAction]) -> GATTRequestID
    ) {
        clientStep(submit, at, &out) { $0.pending[$1] = what }
    }

    func characteristic(_ uuid: String) -> GATTProfile.Characteristic? { Self.characteristic(uuid, in: profile) }

    /// The characteristic a session names by UUID text (`FFF1`, or 128-bit) in `profile`.
    static func characteristic(_ uuid: String, in profile: GATTProfile?) -> GATTProfile.Characteristic? {
        guard let u = BluetoothUUID(uuid) ?? UInt16(uuid, radix: 16).map({ BluetoothUUID($0) }) else { return nil }
        return profile?.characteristic(u)
    }

    mutating func run(_ actions: [VendorSessionAction], _ at: EventTime, _ out: inout [Output]) {
        for a in actions {
            switch a {
            case let .subscribe(uuid):
                guard let ch = characteristic(uuid) else {
                    sessionStep(.characteristicMissing(uuid, at), at, &out)
                    continue
                }
                let now = at.monotonic
                subscribed.insert(ch.valueHandle)
                request(.subscribe, at, &out) { $0.subscribe(ch, notify: true, indicate: false, now: now, into: &$1) }
            case let .write(uuid, value):
                guard let ch = characteristic(uuid) else {
                    sessionStep(.characteristicMissing(uuid, at), at, &out)
                    continue
                }
                let now = at.monotonic
                request(.write, at, &out) { $0.write(ch.valueHandle, value, now: now, into: &$1) }
            case let .emit(r): out.append(.emit(r))
            case let .log(s): out.append(.log(s))
            case .disconnect: out.append(.disconnect)
            case let .finished(o):
                outcome = o
                out.append(.finished(o))
            }
        }
    }

    mutating func gatt(_ actions: [GATTClientAction], _ at: EventTime, _ out: inout [Output]) {
        for a in actions {
            switch a {
            case let .send(pdu): out.append(.send(pdu))
            case let .notification(handle, value):
                guard subscribed.contains(handle) else {
                    // (Probe V: a reading sent on the Device Name's handle was taken as the cuff's.)
                    if !saidStrayNotification {
                        saidStrayNotification = true
                        out.append(
                            .log("ignored a notification of handle \(Hex.handle(handle)), which was not subscribed"))
                    }
                    continue
                }
                sessionStep(.notification(value, at), at, &out)
            case let .indication(handle, value):
                // Confirmed only once kept, or when it carries no reading: a cuff deletes what was confirmed.
                let verdict = UninvitedIndication.classify(
                    handle: handle, value: value, profile: profile, device: device, at: at)
                out += verdict.outputs(log: Output.log, measurement: Output.measurement) {
                    var confirm: [Output] = []
                    clientStep({ $0.confirmIndication(into: &$1) }, at, &confirm)
                    return confirm
                }
            case let .raiseSecurity(level):
                out.append(.raiseSecurity(level))
            case let .failed(e):
                sessionStep(.requestFailed(e.message, at), at, &out)
            case let .completed(id, result):
                guard let p = pending.removeValue(forKey: id) else { continue }
                switch (p, result) {
                case (.mtu, _): break
                case let (.discovery, .success(.profile(prof))):
                    profile = prof
                    sessionStep(.start(at), at, &out)
                case let (.discovery, .failure(e)), let (.subscribe, .failure(e)), let (.write, .failure(e)):
                    sessionStep(.requestFailed(e.message, at), at, &out)
                case (.subscribe, .success): sessionStep(.subscribed(at), at, &out)
                case (.write, .success): sessionStep(.writeCompleted(at), at, &out)
                default: break
                }
            }
        }
    }
}

/// The array-returning forms (tests): each is its `into:` form into a new array.
extension VendorCentral {
    public mutating func start(at: EventTime) -> [Output] {
        var out: [Output] = []
        start(at: at, into: &out)
        return out
    }
    public mutating func adopt(client: GATTClient, profile: GATTProfile, at: EventTime) -> [Output] {
        var out: [Output] = []
        adopt(client: client, profile: profile, at: at, into: &out)
        return out
    }
    public mutating func securityRaised(_ level: SecurityLevel, at: EventTime) -> [Output] {
        var out: [Output] = []
        securityRaised(level, at: at, into: &out)
        return out
    }
    public mutating func securityRefused(at: EventTime) -> [Output] {
        var out: [Output] = []
        securityRefused(at: at, into: &out)
        return out
    }
    public mutating func receive(_ pdu: [UInt8], at: EventTime) -> [Output] {
        var out: [Output] = []
        receive(pdu, at: at, into: &out)
        return out
    }
    public mutating func tick(at: EventTime) -> [Output] {
        var out: [Output] = []
        tick(at: at, into: &out)
        return out
    }
    public mutating func disconnected(at: EventTime) -> [Output] {
        var out: [Output] = []
        disconnected(at: at, into: &out)
        return out
    }
}
