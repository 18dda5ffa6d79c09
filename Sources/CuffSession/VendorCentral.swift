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

        mutating func handle(_ e: VendorSessionEvent) -> [VendorSessionAction] {
            switch self {
            case var .microlife(s):
                defer { self = .microlife(s) }
                return s.handle(e)
            case var .yonker(s):
                defer { self = .yonker(s) }
                return s.handle(e)
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
    public private(set) var client = GATTClient()
    var profile: GATTProfile?
    var pending: [GATTRequestID: Pending] = [:]
    public private(set) var outcome: SessionOutcome?
    /// The device the records of unasked standard measurements name.
    public var device: DeviceInfo

    public init(_ session: Session, device: DeviceInfo = DeviceInfo(address: "unknown")) {
        self.session = session
        self.device = device
    }

    public var nextDeadline: Timestamp? { [session.nextDeadline, client.nextDeadline].compactMap { $0 }.min() }

    /// The link is up: exchange the MTU and discover.
    public mutating func start(at: EventTime) -> [Output] {
        let m = client.exchangeMTU(now: at.monotonic)
        pending[m.id] = .mtu
        let d = client.discover(services: [], now: at.monotonic)
        pending[d.id] = .discovery
        return gatt(m.actions + d.actions, at)
    }

    /// Carries on with a link another session discovered: its client, its database.
    public mutating func adopt(client: GATTClient, profile: GATTProfile, at: EventTime) -> [Output] {
        self.client = client
        self.profile = profile
        return run(session.handle(.start(at)), at)
    }

    public mutating func securityRaised(_ level: SecurityLevel, at: EventTime) -> [Output] {
        gatt(client.securityRaised(level: level, now: at.monotonic), at)
    }
    public mutating func securityRefused(at: EventTime) -> [Output] {
        gatt(client.securityRefused(now: at.monotonic), at)
    }

    public mutating func receive(_ pdu: [UInt8], at: EventTime) -> [Output] {
        gatt(client.receive(pdu, now: at.monotonic), at)
    }
    public mutating func tick(at: EventTime) -> [Output] {
        gatt(client.tick(now: at.monotonic), at) + run(session.handle(.tick(at)), at)
    }
    public mutating func disconnected(at: EventTime) -> [Output] { run(session.handle(.disconnected(at)), at) }

    func characteristic(_ uuid: String) -> GATTProfile.Characteristic? {
        guard let u = BluetoothUUID(uuid) ?? UInt16(uuid, radix: 16).map({ BluetoothUUID($0) }) else { return nil }
        return profile?.characteristic(u)
    }

    mutating func run(_ actions: [VendorSessionAction], _ at: EventTime) -> [Output] {
        var out: [Output] = []
        for a in actions {
            switch a {
            case let .subscribe(uuid):
                guard let ch = characteristic(uuid) else {
                    out += run(session.handle(.requestFailed("characteristic \(uuid) not on this device", at)), at)
                    continue
                }
                let r = client.subscribe(ch, notify: true, indicate: false, now: at.monotonic)
                pending[r.id] = .subscribe
                out += gatt(r.actions, at)
            case let .write(uuid, value):
                guard let ch = characteristic(uuid) else {
                    out += run(session.handle(.requestFailed("characteristic \(uuid) not on this device", at)), at)
                    continue
                }
                let r = client.write(ch.valueHandle, value, now: at.monotonic)
                pending[r.id] = .write
                out += gatt(r.actions, at)
            case let .emit(r): out.append(.emit(r))
            case let .log(s): out.append(.log(s))
            case .disconnect: out.append(.disconnect)
            case let .finished(o):
                outcome = o
                out.append(.finished(o))
            }
        }
        return out
    }

    mutating func gatt(_ actions: [GATTClientAction], _ at: EventTime) -> [Output] {
        var out: [Output] = []
        for a in actions {
            switch a {
            case let .send(pdu): out.append(.send(pdu))
            case let .notification(_, value): out += run(session.handle(.notification(value, at)), at)
            case let .indication(handle, value):
                // Confirmed only once kept, or when it carries no reading: a cuff deletes what was confirmed.
                let verdict = UninvitedIndication.classify(
                    handle: handle, value: value, profile: profile, device: device, at: at)
                out += verdict.outputs(log: Output.log, measurement: Output.measurement) {
                    gatt(client.confirmIndication(), at)
                }
            case let .raiseSecurity(level):
                out.append(.raiseSecurity(level))
            case let .failed(e):
                out += run(session.handle(.requestFailed(e.message, at)), at)
            case let .completed(id, result):
                guard let p = pending.removeValue(forKey: id) else { continue }
                switch (p, result) {
                case (.mtu, _): break
                case let (.discovery, .success(.profile(prof))):
                    profile = prof
                    out += run(session.handle(.start(at)), at)
                case let (.discovery, .failure(e)), let (.subscribe, .failure(e)), let (.write, .failure(e)):
                    out += run(session.handle(.requestFailed(e.message, at)), at)
                case (.subscribe, .success): out += run(session.handle(.subscribed(at)), at)
                case (.write, .success): out += run(session.handle(.writeCompleted(at)), at)
                default: break
                }
            }
        }
        return out
    }
}
