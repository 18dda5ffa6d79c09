// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Transport

/// Is bluetoothd running, and what does that mean for cuff?
///
/// cuff talks to the kernel directly (L2CAP sockets, raw HCI, MGMT). bluetoothd shares the same
/// kernel objects: it listens on ATT CID 4 too (only one listener gets each link), may own an
/// outgoing ATT channel (EBUSY), and answers pairing requests itself — rejecting them when no
/// agent is registered ("No agent available", SMP Pairing Failed 0x0C, EACCES on our socket).
public enum BluetoothDaemon {
    /// The pids of running `bluetoothd` processes (from /proc/<pid>/comm).
    public static func runningPIDs() -> [Int] {
        guard case .success(let names) = Sys.listDirectory("/proc") else { return [] }
        return names.compactMap(Int.init).filter { pid in
            guard case .success(let comm) = Sys.readFile("/proc/\(pid)/comm", limit: 64) else { return false }
            return String(decoding: comm, as: UTF8.self).trimmingSuffix(while: { $0 == "\n" }) == "bluetoothd"
        }.sorted()
    }

    /// Whether bluetoothd runs.
    public static var isRunning: Bool { !runningPIDs().isEmpty }

    /// What to do, for a given role, when bluetoothd runs; nil when it doesn't.
    public static func advice(simulating: Bool) -> String? {
        guard isRunning else { return nil }
        if simulating {
            return
                "bluetoothd is running: it also listens on the ATT channel and may advertise; stop it for the simulator (`sudo systemctl stop bluetooth`)"
        }
        return
            "bluetoothd is running: it answers pairing requests itself — register an agent (`bluetoothctl` → `agent NoInputNoOutput`, `default-agent`) or stop it (`sudo systemctl stop bluetooth`) so cuff's own agent can answer"
    }
}

extension StringProtocol {
    func trimmingSuffix(while predicate: (Character) -> Bool) -> SubSequence {
        var end = endIndex
        while end > startIndex {
            let before = index(before: end)
            guard predicate(self[before]) else { break }
            end = before
        }
        return self[startIndex..<end]
    }
}
