// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore

/// A reading from a vendor-protocol cuff (Microlife, Yonker): whole mmHg and bpm, the cuff's
/// local time to the minute, no MAP.
public struct VendorReading: Sendable, Hashable {
    public var protocolName: String
    public var systolic: UInt8
    public var diastolic: UInt8
    public var pulse: UInt8
    /// The cuff's local time, nil when its date is impossible.
    public var timestamp: String?
    /// From the cuff's memory (Microlife's download), or just measured (Yonker's result).
    public var stored: Bool
    /// The bytes it came from (the record's 8 value bytes, or the 15-byte notification).
    public var raw: [UInt8]
}

/// What happens to a vendor-protocol session (Microlife, Yonker): one vocabulary for both.
public enum VendorSessionEvent: Sendable, Hashable {
    /// The link is up and the vendor service found.
    case start(EventTime)
    case subscribed(EventTime)
    case writeCompleted(EventTime)
    case requestFailed(String, EventTime)
    /// The device has no characteristic with this UUID: not this protocol's cuff.
    case characteristicMissing(String, EventTime)
    case notification([UInt8], EventTime)
    case disconnected(EventTime)
    case tick(EventTime)
}

/// What a vendor-protocol session asks the driver to do.
public enum VendorSessionAction: Sendable, Hashable {
    /// Subscribe to notifications of the characteristic with this UUID (`FFF1`, or 128-bit text).
    case subscribe(String)
    /// Write (with response) to the characteristic with this UUID.
    case write(String, [UInt8])
    case emit(VendorReading)
    case log(String)
    case disconnect
    case finished(SessionOutcome)

    /// The actions that end a session: why (a log line), the disconnect when the link is still
    /// up, and the outcome.
    static func ending(_ o: SessionOutcome, _ why: String, disconnect: Bool, into out: inout [VendorSessionAction]) {
        out.append(.log(why))
        if disconnect { out.append(.disconnect) }
        out.append(.finished(o))
    }
}

extension VendorReading {
    /// The record's decoded object (`"characteristic"` is the protocol's name).
    public var json: JSON {
        .object([
            ("type", .string("measurement")), ("characteristic", .string(protocolName)), ("unit", .string("mmHg")),
            ("systolic", .int(Int64(systolic))), ("diastolic", .int(Int64(diastolic))),
            ("mean_arterial_pressure", .null),
            ("pulse_rate", .int(Int64(pulse))), ("timestamp", JSON.from(timestamp, JSON.string)), ("user_id", .null),
            ("status", .null),
            ("warnings", warnings.json), ("raw", .string(Hex.encode(raw))),
        ])
    }

    /// What is wrong with the reading, from its values alone (so a rebuilt one says the same):
    /// a date that is no calendar date (no time stamp), and values no measurement gives — a zero,
    /// or a systolic not above the diastolic (probe V: 0/0 pulse 0, 255/255 pulse 255 and 0/200
    /// were printed as readings with no warning). Named by field, never by value.
    public var warnings: [DecodeWarning] {
        Plausibility.vendorReading(systolic: systolic, diastolic: diastolic, pulse: pulse, hasTime: timestamp != nil)
    }

    /// The reading again from what a store kept: the protocol's name and the raw bytes (a
    /// Microlife record's 8 value bytes, a Yonker result notification); nil when they are not one.
    public static func rebuild(protocolName: String, raw: [UInt8], stored: Bool) -> VendorReading? {
        switch protocolName {
        case "microlife":
            guard raw.count == Microlife.recordValueBytes else { return nil }
            let r = Microlife.records(inPayload: ([UInt8](repeating: 0, count: Microlife.recordsOffset) + raw)[...])
                .records
            guard let rec = r.first else { return nil }
            return VendorReading(
                protocolName: protocolName, systolic: rec.systolic, diastolic: rec.diastolic, pulse: rec.pulse,
                timestamp: rec.time.iso8601, stored: stored, raw: raw)
        case "yonker":
            guard case let .result(x)? = try? Yonker.decode(raw[...]).value else { return nil }
            return VendorReading(
                protocolName: protocolName, systolic: x.systolic, diastolic: x.diastolic, pulse: x.pulse,
                timestamp: x.time.iso8601, stored: stored, raw: raw)
        default:
            return nil
        }
    }

    /// The record every sink takes.
    public func record(device: DeviceInfo, at: EventTime) -> MeasurementRecord {
        MeasurementRecord(
            characteristic: .named(protocolName), raw: raw, unit: .mmHg, systolic: SFloat(Double(systolic)),
            diastolic: SFloat(Double(diastolic)),
            meanArterialPressure: .nan, pulseRate: SFloat(Double(pulse)), timestamp: timestamp, userID: nil,
            status: nil, warnings: warnings,
            device: device, receivedAt: at, stored: stored, sequenceNumber: nil, decoded: json)
    }
}

/// The Microlife session (shared/spec/other-cuffs.md): subscribe to 0xFFF1, set the cuff's clock
/// (optional), ask for the measurements, take the response (reassembled from notifications by
/// its length), say goodbye. Pure: events in, actions out; each state's data in its case.
public struct MicrolifeSession: ActionMachine, Sendable {
    public typealias Event = VendorSessionEvent
    public typealias Action = VendorSessionAction

    public enum State: Sendable, Hashable {
        case idle
        case subscribing
        case settingTime
        /// Waiting for the frame that answers the pending command (partly here, maybe).
        case awaiting(Microlife.Reassembler, measurements: Bool)
        case sayingGoodbye
        case done(SessionOutcome)
    }

    public private(set) var state: State = .idle
    public private(set) var readings = 0
    /// Why the last frame the cuff sent was ignored (a bad checksum …): the session's error when
    /// no good answer follows (probe O: said as a timeout, though the cuff had answered).
    var badFrame: String?
    /// Local wall-clock seconds to set the cuff to; nil leaves its clock alone.
    let setTime: Int64?
    /// How long to wait for an answer.
    let answerWindow: Duration
    public private(set) var nextDeadline: Timestamp?

    public init(setTime localSeconds: Int64?, answerWindow: Duration = .seconds(10)) {
        self.setTime = localSeconds
        self.answerWindow = answerWindow
    }

    public mutating func handle(_ event: Event, into out: inout [Action]) {
        if case .done = state { return }
        switch (state, event) {
        case let (.idle, .start(at)):
            state = .subscribing
            nextDeadline = at.monotonic + answerWindow
            out.append(.log("Microlife: subscribing to its responses (fff1)"))
            out.append(.subscribe(Microlife.responseUUID))
        case let (.subscribing, .subscribed(at)):
            nextDeadline = at.monotonic + answerWindow
            if let t = setTime {
                state = .settingTime
                return out.append(.write(Microlife.commandUUID, Microlife.setTimeCommand(DateTime(unixSeconds: t))))
            }
            ask(at, &out)
        case let (.settingTime, .writeCompleted(at)):
            // The cuff answers the clock with a short frame; take it before asking.
            state = .awaiting(Microlife.Reassembler(), measurements: false)
            nextDeadline = at.monotonic + answerWindow
        case (.awaiting(_, false), .writeCompleted), (.awaiting(_, true), .writeCompleted):
            return
        case let (.awaiting(r, measurements), .notification(bytes, at)):
            var r = r
            let (frames, junk) = r.add(bytes)
            if let junk {
                out.append(.log("Microlife: ignored \(junk.count) byte(s) outside a frame: \(Hex.encode(junk))"))
            }
            state = .awaiting(r, measurements: measurements)
            for f in frames {
                let payload: ArraySlice<UInt8>
                do {
                    payload = try Microlife.payload(ofFrame: f[...])
                } catch {
                    out.append(.log("Microlife: ignored a bad frame: \(error.message)"))
                    badFrame = error.message
                    continue
                }
                if !measurements {
                    out.append(.log("Microlife: the cuff acknowledged (\(Hex.encode(payload)))"))
                    return ask(at, &out)
                }
                guard payload.count >= Microlife.recordsOffset else {
                    out.append(.log("Microlife: a \(payload.count)-byte answer is no measurement list; still waiting"))
                    continue
                }
                let (records, skipped) = Microlife.records(inPayload: payload)
                if !skipped.isEmpty {
                    out.append(
                        .log(
                            "Microlife: \(skipped.count) record slot(s) empty, with an impossible date or cut short, skipped"
                        ))
                }
                for rec in records {
                    readings += 1
                    out.append(
                        .emit(
                            VendorReading(
                                protocolName: "microlife", systolic: rec.systolic, diastolic: rec.diastolic,
                                pulse: rec.pulse,
                                timestamp: rec.time.iso8601, stored: true,
                                raw: Array(rec.bytes.prefix(Microlife.recordValueBytes)))))
                }
                state = .sayingGoodbye
                nextDeadline = at.monotonic + answerWindow
                return out.append(.write(Microlife.commandUUID, Microlife.disconnectCommand))
            }
        case let (.sayingGoodbye, .writeCompleted(at)), let (.sayingGoodbye, .requestFailed(_, at)):
            return finish(.completed, "Microlife: download complete", at, disconnect: true, &out)
        case let (_, .characteristicMissing(uuid, at)):
            // (As the standard and Omron sessions say of a device without their service: 7.)
            return finish(
                readings > 0 ? .completed : .serviceMissing,
                "Microlife: no Microlife service on this device (no characteristic \(uuid))", at, disconnect: true, &out
            )
        case let (_, .requestFailed(why, at)):
            return finish(
                readings > 0 ? .completed : .protocolError, "Microlife: a request failed: \(why)", at, disconnect: true,
                &out)
        case let (.sayingGoodbye, .disconnected(at)):
            return finish(.completed, "Microlife: download complete", at, disconnect: false, &out)
        case let (_, .disconnected(at)):
            return finish(
                readings > 0 ? .completed : .disconnected, "Microlife: the cuff disconnected", at, disconnect: false,
                &out)
        case let (_, .tick(at)):
            guard let d = nextDeadline, at.monotonic >= d else { return }
            if readings == 0, let badFrame {
                return finish(
                    .protocolError,
                    "Microlife: the cuff's answer was a bad frame (\(badFrame)), and no good one came within \(answerWindow.secondsDouble) s",
                    at, disconnect: true, &out)
            }
            return finish(
                readings > 0 ? .completed : .timedOut, "Microlife: no answer within \(answerWindow.secondsDouble) s",
                at, disconnect: true, &out)
        default:
            return
        }
    }

    mutating func ask(_ at: EventTime, _ out: inout [Action]) {
        state = .awaiting(Microlife.Reassembler(), measurements: true)
        nextDeadline = at.monotonic + answerWindow
        out.append(.log("Microlife: asking for the stored measurements"))
        out.append(.write(Microlife.commandUUID, Microlife.getMeasurementsCommand))
    }

    mutating func finish(
        _ o: SessionOutcome, _ why: String, _ at: EventTime, disconnect: Bool, _ out: inout [Action]
    ) {
        state = .done(o)
        nextDeadline = nil
        Action.ending(o, why, disconnect: disconnect, into: &out)
    }
}

/// The Yonker session: subscribe to its notify characteristic, wait for the result (byte 0 =
/// 0x81; other values are progress), hand it out, end after a short settle (or when the cuff
/// hangs up). The cuff's clock is unreliable: its time goes out as sent.
public struct YonkerSession: ActionMachine, Sendable {
    public typealias Event = VendorSessionEvent
    public typealias Action = VendorSessionAction

    public enum State: Sendable, Hashable {
        case idle
        case subscribing
        /// Progress notifications seen so far.
        case waiting(progress: Int)
        case settling(until: Timestamp)
        case done(SessionOutcome)
    }

    public private(set) var state: State = .idle
    public private(set) var readings = 0
    let timeout: Duration
    let settle: Duration
    var deadline: Timestamp?

    public init(timeout: Duration = .seconds(300), settle: Duration = .seconds(2)) {
        self.timeout = timeout
        self.settle = settle
    }

    public var nextDeadline: Timestamp? {
        if case let .settling(until) = state { return deadline.map { min($0, until) } ?? until }
        return deadline
    }

    public mutating func handle(_ event: Event, into out: inout [Action]) {
        if case .done = state { return }
        switch (state, event) {
        case let (.idle, .start(at)):
            state = .subscribing
            deadline = at.monotonic + timeout
            out.append(.subscribe(Yonker.notifyUUID))
        case (.subscribing, .subscribed):
            state = .waiting(progress: 0)
            out.append(.log("Yonker: waiting for the result (connect right after measuring)"))
        case let (.waiting, .notification(bytes, at)), let (.settling, .notification(bytes, at)):
            let d: Decoded<Yonker.Notification>
            do {
                d = try Yonker.decode(bytes[...])
            } catch {
                return out.append(.log("Yonker: ignored a notification of \(bytes.count) bytes: \(error.message)"))
            }
            switch d.value {
            case let .progress(code):
                guard case let .waiting(n) = state else { return }
                state = .waiting(progress: n + 1)
                if n == 0 { out.append(.log("Yonker: measuring (progress \(Hex.encode([code])))")) }
            case let .result(r):
                readings += 1
                // The window opens with the first result and is not moved by later ones: a cuff
                // that keeps sending results cannot hold the session (probe V: one a second kept
                // `measure --timeout 15` going past 60 s).
                if case .waiting = state { state = .settling(until: at.monotonic + settle) }
                for w in d.warnings { out.append(.log("Yonker: \(w.code.rawValue): \(w.message)")) }
                out.append(
                    .emit(
                        VendorReading(
                            protocolName: "yonker", systolic: r.systolic, diastolic: r.diastolic, pulse: r.pulse,
                            timestamp: r.time.iso8601,
                            stored: false, raw: bytes)))
            }
        case let (_, .characteristicMissing(uuid, at)):
            return finish(
                .serviceMissing, "Yonker: no Yonker service on this device (no characteristic \(uuid))", at,
                disconnect: true, &out)
        case let (_, .requestFailed(why, at)):
            return finish(.protocolError, "Yonker: subscribing failed: \(why)", at, disconnect: true, &out)
        case let (_, .disconnected(at)):
            return finish(
                readings > 0 ? .completed : .disconnected, "Yonker: the cuff disconnected", at, disconnect: false, &out)
        case let (.settling(until), .tick(at)) where at.monotonic >= until:
            return finish(.completed, "Yonker: result received", at, disconnect: true, &out)
        case let (_, .tick(at)):
            guard let d = deadline, at.monotonic >= d else { return }
            return finish(
                readings > 0 ? .completed : .timedOut, "Yonker: no result within \(timeout.secondsDouble) s", at,
                disconnect: true, &out)
        default:
            return
        }
    }

    mutating func finish(
        _ o: SessionOutcome, _ why: String, _ at: EventTime, disconnect: Bool, _ out: inout [Action]
    ) {
        state = .done(o)
        deadline = nil
        Action.ending(o, why, disconnect: disconnect, into: &out)
    }
}
