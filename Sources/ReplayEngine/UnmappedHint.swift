// SPDX-License-Identifier: GPL-2.0-or-later
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
                for (h, n) in u.handles {
                    groups[i].totals[h, default: .init()].notifications += n.notifications
                    groups[i].totals[h, default: .init()].indications += n.indications
                }
            } else {
                keys.append(key)
                groups.append(UnmappedHint(first: u, connections: 1, totals: u.handles))
            }
        }
        return groups
    }

    /// The two lines for stderr: what is unknown, and the `--handle` options that would map it
    /// (`file` is the capture, for the example command).
    public func lines(file: String) -> [String] {
        let handles = totals.keys.sorted()
        let list = handles.map { h -> String in
            let n = totals[h]!
            var kinds: [String] = []
            if n.indications > 0 { kinds.append("\(n.indications) indication\(n.indications == 1 ? "" : "s")") }
            if n.notifications > 0 { kinds.append("\(n.notifications) notification\(n.notifications == 1 ? "" : "s")") }
            return "\(Hex.handle(h)) (\(kinds.joined(separator: ", ")))"
        }
        let conns = connections == 1 ? "connection \(Hex.handle(first.connectionHandle))" : "\(connections) connections"
        let example = handles.map { h in "--handle \(Hex.handle(h))=\(totals[h]!.indications > 0 ? "2a35" : "2a36")" }
            .joined(separator: " ")
        return [
            first.usedEarlierMap
                ? "hci\(first.adapter) \(conns) to \(first.address): no service discovery on the connection, and the handles an earlier connection to this address discovered do not cover these value handles (is it another cuff, or another table?); their values were not read: \(list.joined(separator: ", "))."
                : "hci\(first.adapter) \(conns) to \(first.address): no service discovery in the capture, so these value handles are unknown: \(list.joined(separator: ", ")).",
            "map them with --handle HANDLE=UUID (indications usually carry the Blood Pressure Measurement 2a35, or 2b34 enhanced; notifications the Intermediate Cuff Pressure 2a36, or 2b35), e.g. cuff replay \(file) \(example)",
        ]
    }
}
