// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import Capture
import CuffCore

/// `cuff replay`'s hint about values on handles nothing maps: one per controller, device and set
/// of handles, however many connections showed it, with the counts added up.
public struct UnmappedHint: Sendable, Hashable {
    /// The first connection that showed these handles.
    public var first: CaptureReplay.Unmapped
    /// How many connections showed them.
    public var connections: Int
    /// Value handle → notifications and indications over all those connections.
    public var totals: [UInt16: CaptureReplay.Unmapped.Counts]

    /// `unmapped` grouped, in the order each group first appears.
    public static func group(_ unmapped: [CaptureReplay.Unmapped]) -> [UnmappedHint] {
        var keys: [String] = []
        var groups: [UnmappedHint] = []
        for u in unmapped {
            let key =
                "\(u.adapter)|\(u.address)|\(u.usedEarlierMap)|"
                + u.handles.keys.sorted().map { String($0) }.joined(separator: ",")
            if let i = keys.firstIndex(of: key) {
                groups[i].connections += 1
                for (h, n) in u.handles { groups[i].totals[h, default: .init()].merge(n) }
            } else {
                keys.append(key)
                groups.append(UnmappedHint(first: u, connections: 1, totals: u.handles))
            }
        }
        return groups
    }

    /// The two lines for stderr: what is unknown, and the `--handle` options that would map it
    /// (`file` is the capture, for the example command). Each handle's characteristic in the
    /// example is the one its values look like (``ValueShape``); a handle whose values look like
    /// no reading (Record Access Control Point responses, or nothing known) is left out of it.
    public func lines(file: String) -> [String] {
        let handles = totals.keys.sorted()
        let list = handles.map { h -> String in
            let n = totals[h]!
            var kinds: [String] = []
            if n.indications > 0 { kinds.append("\(n.indications) indication\(n.indications == 1 ? "" : "s")") }
            if n.notifications > 0 { kinds.append("\(n.notifications) notification\(n.notifications == 1 ? "" : "s")") }
            return "\(Hex.handle(h)) (\(kinds.joined(separator: ", ")); \(Self.looks(n.looksLike)))"
        }
        let conns = connections == 1 ? "connection \(Hex.handle(first.connectionHandle))" : "\(connections) connections"
        let mappable = handles.filter { Self.reading(totals[$0]!.looksLike) != nil }
        let example = mappable.map { "--handle \(Hex.handle($0))=\(Self.reading(totals[$0]!.looksLike)!)" }
        let left = handles.count - mappable.count
        let leftOut = left == 0 ? "" : " (\(left == 1 ? "the handle" : "the \(left) handles") with no reading left out)"
        return [
            first.usedEarlierMap
                ? "hci\(first.adapter) \(conns) to \(first.address): no service discovery on the connection, and the handles an earlier connection to this address discovered do not cover these value handles (is it another cuff, or another table?); their values were not read: \(list.joined(separator: ", "))."
                : "hci\(first.adapter) \(conns) to \(first.address): no service discovery in the capture, so these value handles are unknown: \(list.joined(separator: ", ")).",
            mappable.isEmpty
                ? "none of their values looks like a Blood Pressure reading; if you know what a handle carries, map it with --handle HANDLE=UUID (e.g. 2a35 for the Blood Pressure Measurement)"
                : "map them with --handle HANDLE=UUID; by what their values look like: cuff replay \(file) \(example.joined(separator: " "))\(leftOut)",
        ]
    }

    /// What a handle's values look like, for the list.
    static func looks(_ c: CuffCharacteristic?) -> String {
        switch c {
        case .recordAccessControlPoint?: "Record Access Control Point responses 2a52, no readings"
        case let c?:
            "like \(c.uuid16.flatMap { BPSCharacteristic(rawValue: $0)?.name } ?? c.rawValue) \(reading(c) ?? "")"
        case nil: "like no Blood Pressure value"
        }
    }

    /// The `--handle` UUID for a characteristic that carries readings, or nil.
    static func reading(_ c: CuffCharacteristic?) -> String? {
        switch c {
        case .bloodPressureMeasurement?, .intermediateCuffPressure?, .enhancedBloodPressureMeasurement?,
            .enhancedIntermediateCuffPressure?, .bloodPressureRecord?:
            c!.uuid16.map { String($0, radix: 16) }
        default: nil
        }
    }
}
