// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import GATT

/// `cuff replay` of a vendor-protocol session (Microlife, Yonker): the session machine the live
/// central runs (``MicrolifeSession``, ``YonkerSession``), fed the captured connection as the live
/// central feeds it — the subscription confirmed by the cuff's answer to the CCCD write, the
/// central's writes answered, the cuff's notifications of the handles the session subscribed
/// to — and its readings given as the live session's records.
///
/// The captured central asks; this observer only follows. What the session would have sent is
/// not checked against what the central sent: a capture of the vendor's own app (which may not
/// set the clock, or asks in another order) is followed as far as the answers allow.
public struct VendorCaptureObserver: CuffProtocolObserver {
    var session: VendorCentral.Session
    let gatt: GATTProfile
    var device: DeviceInfo
    public private(set) var measurements = 0
    public private(set) var isFinished = false
    var started = false
    /// Value handles the session subscribed to, and their CCCDs (the central's write of one,
    /// answered, is the subscription's confirmation).
    var subscribed: Set<UInt16> = []
    var cccds: Set<UInt16> = []
    var confirmedSubscription = false
    /// The handle of the central's write request that waits for its answer.
    var pendingWrite: UInt16?
    var saidStrayNotification = false
    /// Record keys handed out in this session (the live session's deduplication: a download
    /// that repeats a record gives it once).
    var keys: VendorRecordKeys
    var scratch = ActionBuffer<VendorSessionAction>()

    public init(_ session: VendorCentral.Session, gatt: GATTProfile, device: DeviceInfo, known: Set<String> = []) {
        self.session = session
        self.gatt = gatt
        self.device = device
        keys = VendorRecordKeys(known)
    }

    public var deadline: Timestamp? { isFinished ? nil : session.nextDeadline }

    static func time(_ t: Timestamp) -> EventTime { EventTime(monotonic: t, wallMicros: t.flooredMicroseconds) }

    public mutating func connected(at: EventTime, into out: inout [ObserverOutput]) {
        guard !started else { return }
        started = true
        out.append(.emit(.session(SessionRecord(event: .start, device: device, at: at))))
        step(.start(at), at, &out)
    }

    public mutating func pdu(_ bytes: [UInt8], fromCentral: Bool, at: EventTime, into out: inout [ObserverOutput]) {
        guard !isFinished, bytes.count >= 1 else { return }
        let handle: UInt16? = bytes.count >= 3 ? UInt16(bytes[1]) | UInt16(bytes[2]) << 8 : nil
        switch (bytes[0], fromCentral) {
        case (0x12, true):  // Write Request
            guard let handle else { return }
            pendingWrite = handle
            if !cccds.contains(handle) { confirmSubscription(at, &out) }
        case (0x52, true):  // Write Command: no answer comes
            if let handle, !cccds.contains(handle) { confirmSubscription(at, &out) }
        case (0x13, false):  // Write Response
            guard let h = pendingWrite else { return }
            pendingWrite = nil
            if cccds.contains(h) {
                confirmSubscription(at, &out)
            } else {
                step(.writeCompleted(at), at, &out)
            }
        case (0x01, false):  // Error Response to the pending write
            guard bytes.count >= 5, bytes[1] == 0x12, let h = pendingWrite else { return }
            pendingWrite = nil
            let code = ATTErrorCode(bytes[4])
            step(.requestFailed("\(code) at \(Hex.handle(h)) for a write", at), at, &out)
        case (0x1B, false):  // Handle Value Notification
            guard let handle else { return }
            guard subscribed.contains(handle) else {
                if !saidStrayNotification {
                    saidStrayNotification = true
                    out.append(.log("ignored a notification of handle \(Hex.handle(handle)), which was not subscribed"))
                }
                return
            }
            // (A capture that lost the CCCD write's answer: the cuff notifying says it was taken.)
            confirmSubscription(at, &out)
            step(.notification(Array(bytes[3...]), at), at, &out)
        default:
            return
        }
    }

    /// The subscription is confirmed once: by the cuff's answer to the CCCD write, or, when the
    /// capture lacks it, by the first command the central writes or the first notification.
    mutating func confirmSubscription(_ at: EventTime, _ out: inout [ObserverOutput]) {
        guard !confirmedSubscription, !subscribed.isEmpty else { return }
        confirmedSubscription = true
        step(.subscribed(at), at, &out)
    }

    public mutating func advance(to time: Timestamp, inclusive: Bool, into out: inout [ObserverOutput]) {
        while !isFinished, let d = session.nextDeadline, inclusive ? d <= time : d < time {
            step(.tick(Self.time(d)), Self.time(d), &out)
        }
    }

    public mutating func disconnected(_ why: String?, at: EventTime, into out: inout [ObserverOutput]) {
        advance(to: at.monotonic, inclusive: true, into: &out)
        step(.disconnected(at), at, &out)
        if !isFinished { end(measurements > 0 ? .completed : .disconnected, why, at, &out) }
    }

    /// The session takes `event` (with ``scratch``); what it asks for is followed or becomes records.
    mutating func step(_ event: VendorSessionEvent, _ at: EventTime, _ out: inout [ObserverOutput]) {
        guard !isFinished else { return }
        var actions = scratch.take()
        defer { scratch.giveBack(&actions) }
        session.handle(event, into: &actions)
        for a in actions where !isFinished {
            switch a {
            case let .subscribe(uuid):
                guard let ch = VendorCentral.characteristic(uuid, in: gatt) else {
                    step(.characteristicMissing(uuid, at), at, &out)
                    continue
                }
                subscribed.insert(ch.valueHandle)
                if let c = ch.cccdHandle { cccds.insert(c) }
            case let .write(uuid, _):
                // (The central writes; the answer is its own event.)
                if VendorCentral.characteristic(uuid, in: gatt) == nil {
                    step(.characteristicMissing(uuid, at), at, &out)
                }
            case let .emit(r):
                let record = r.record(device: device, at: at)
                if keys.admit(record) {
                    measurements += 1
                    out.append(.emit(.measurement(record)))
                } else {
                    out.append(.log(VendorRecordKeys.skipped(record)))
                }
            case let .log(s): out.append(.log(s))
            case .disconnect: break
            case let .finished(o): end(o, nil, at, &out)
            }
        }
    }

    mutating func end(_ o: SessionOutcome, _ why: String?, _ at: EventTime, _ out: inout [ObserverOutput]) {
        isFinished = true
        if let why { out.append(.log(why)) }
        out.append(
            .emit(
                .session(
                    SessionRecord(
                        event: .end, device: device, at: at, outcome: o, measurements: measurements, message: why))))
    }
}
