// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore

/// A Microlife cuff (BP3GY1-2N) as the public sources describe it: commands written to 0xFFF2,
/// answers notified on 0xFFF1 in frames of at most `chunk` bytes a notification. Pure: what the
/// client does in, what the cuff sends out.
public struct MicrolifeCuff: Sendable {
    public enum Action: Sendable, Hashable {
        /// Notify this on 0xFFF1.
        case notify([UInt8])
        case log(String)
        case disconnect(String)
    }

    /// The memory, in slots: a nil slot is empty (all zero), as the cuff sends it.
    public var slots: [Microlife.Record?]
    /// Bytes per notification (an ATT MTU of 23 leaves 20).
    public var chunk: Int
    public private(set) var subscribed = false
    /// The cuff's clock as last set (year − 2000 … second), if it was.
    public private(set) var clock: DateTime?

    public init(slots: [Microlife.Record?], chunk: Int = 20) {
        self.slots = slots
        self.chunk = max(1, chunk)
    }

    public mutating func subscriptionChanged(_ on: Bool) { subscribed = on }

    /// A write to 0xFFF2: appends what the cuff does about it to `out` (the ``ActionMachine``
    /// convention).
    public mutating func written(_ value: [UInt8], into out: inout [Action]) {
        let payload: ArraySlice<UInt8>
        do {
            payload = try Microlife.payload(ofFrame: value[...], header: Microlife.commandHeader)
        } catch {
            return out.append(.log("Microlife cuff: ignored a bad command: \(error.message)"))
        }
        guard let op = payload.first else { return out.append(.log("Microlife cuff: empty command")) }
        switch op {
        case 0x0D where payload.count == 7:
            let p = Array(payload)
            let set = DateTime(
                year: 2000 + UInt16(p[1]), month: p[2], day: p[3], hours: p[4], minutes: p[5], seconds: p[6])
            clock = set
            out.append(.log("Microlife cuff: clock set to \(set.description)"))
            send(Microlife.frame([0x81], header: Microlife.responseHeader), into: &out)
        case 0x00
        where Array(payload)
            == Array(Microlife.getMeasurementsCommand[4..<(Microlife.getMeasurementsCommand.count - 1)]):
            var p = [UInt8](repeating: 0, count: Microlife.recordsOffset)
            for s in slots { p += s?.bytes ?? [UInt8](repeating: 0, count: Microlife.recordStride) }
            let frame = Microlife.frame(p, header: Microlife.responseHeader)
            out.append(.log("Microlife cuff: sending \(slots.count) record slot(s) in \(frame.count) bytes"))
            send(frame, into: &out)
        case 0x04:
            out += [.log("Microlife cuff: goodbye"), .disconnect("the client said goodbye")]
        default:
            out.append(.log("Microlife cuff: unknown command \(Hex.encode(payload))"))
        }
    }

    /// ``written(_:into:)`` into a new array (tests).
    public mutating func written(_ value: [UInt8]) -> [Action] {
        var out: [Action] = []
        written(value, into: &out)
        return out
    }

    func send(_ frame: [UInt8], into out: inout [Action]) {
        guard subscribed else { return out.append(.log("Microlife cuff: answer not sent: nobody subscribed to fff1")) }
        for start in stride(from: 0, to: frame.count, by: chunk) {
            out.append(.notify(Array(frame[start..<min(frame.count, start + chunk)])))
        }
    }
}

/// A Yonker cuff (YK-IBPA1): a client that subscribes right after the measurement gets the
/// 15-byte result notification.
public struct YonkerCuff: Sendable {
    public enum Action: Sendable, Hashable {
        case notify([UInt8])
        case log(String)
    }

    public var result: Yonker.Result

    public init(result: Yonker.Result) { self.result = result }

    /// The client subscribed (`on`) or unsubscribed: appends what the cuff sends to `out` (the
    /// ``ActionMachine`` convention).
    public mutating func subscriptionChanged(_ on: Bool, into out: inout [Action]) {
        guard on else { return }
        out.append(.log("Yonker cuff: result \(result.systolic)/\(result.diastolic) pulse \(result.pulse)"))
        out.append(.notify(result.bytes))
    }

    /// ``subscriptionChanged(_:into:)`` into a new array (tests).
    public mutating func subscriptionChanged(_ on: Bool) -> [Action] {
        var out: [Action] = []
        subscriptionChanged(on, into: &out)
        return out
    }
}
