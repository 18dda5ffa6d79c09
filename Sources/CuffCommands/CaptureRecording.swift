// SPDX-License-Identifier: GPL-2.0-or-later
import Capture
import CuffCore
import CuffRuntime

/// Writes a live or simulated session as a btsnoop file (`--capture FILE`), with the HCI events a
/// real controller would log around the ATT traffic, as the central's controller sees it.
///
/// `adapter` is the controller's index (the N of hciN) the records name; a session with no
/// controller (a simulated cuff, a Unix socket) records 0. With `announceAt` the controller's New
/// Index, Open Index and Index Info go into the file at once (as `btmon` logs each controller when
/// it starts), so a capture names its controller even when no connection came up.
public final class CaptureRecording {
    var writer: BTSnoopWriter<FileByteSink>
    var recorder: SessionRecorder
    let peer: BDAddress
    let path: String
    var failed = false

    public init(
        path: String, datalink: BTSnoopDatalink, peer: BDAddress, local: BDAddress = BDAddress("00:AA:01:01:00:01")!,
        adapter: UInt16 = 0, announceAt: Timestamp? = nil
    ) throws {
        self.path = path
        self.peer = peer
        writer = try BTSnoopWriter(path: path, datalink: datalink)
        recorder = SessionRecorder(datalink: datalink, adapter: adapter, localAddress: local)
        if let announceAt {
            try writer.write(contentsOf: recorder.announce(at: announceAt))
            try writer.flush()
        }
    }

    public func handle(_ e: LinkEvent) {
        guard !failed else { return }
        do {
            switch e {
            case let .connected(at):
                try writer.write(contentsOf: recorder.connected(peer: peer, role: .central, at: ts(at.wallMicros)))
            case let .pdu(sent, pdu, at):
                try writer.write(
                    contentsOf: recorder.att(pdu, direction: sent ? .fromLocal : .toLocal, at: ts(at.wallMicros)))
            case let .disconnected(at):
                try writer.write(contentsOf: recorder.disconnected(at: ts(at.wallMicros)))
            }
        } catch {
            failed = true
            Console.log("cuff: writing the capture \(path) failed: \(error)")
        }
    }

    public func finish() {
        do { try writer.flush() } catch { Console.log("cuff: writing the capture \(path) failed: \(error)") }
    }

    /// (Saturating: a wall clock in µs always fits, but nothing here should trap on one that does not.)
    func ts(_ micros: Int64) -> Timestamp {
        let (ns, o) = micros.multipliedReportingOverflow(by: 1000)
        return Timestamp(nanoseconds: o ? (micros < 0 ? .min : .max) : ns)
    }
}
