// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// Builds large btsnoop files for throughput benchmarks by repeating recorded sessions.
///
/// Each repetition logs one session twice, as the shared two-controller btmon capture does: on
/// adapter 1 as the central (client PDUs `fromLocal`) and on adapter 0 as the peripheral (the same
/// PDUs mirrored), interleaved PDU by PDU, with its own connection handle (cycling 0x0001…0x0EFF)
/// and timestamps that advance across sessions.
public enum BigCapture {
    /// One session's ATT PDUs from the central's side.
    public typealias Session = [(pdu: [UInt8], direction: ATTDirection)]

    /// A blood-pressure measurement session: MTU exchange, service and descriptor discovery, CCCD
    /// write, a fragmented long read, one indication and its confirmation.
    public static let bloodPressureSession: Session = [
        ([0x02, 0x05, 0x02], .fromLocal),
        ([0x03, 0xF7, 0x00], .toLocal),
        ([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28], .fromLocal),
        ([0x11, 0x06, 0x01, 0x00, 0x09, 0x00, 0x10, 0x18], .toLocal),
        // Descriptor discovery rather than Read By Type 0x2803: btmon 5.66 (Debian 12) segfaults
        // replaying any Read By Type Request for 0x2803, even one injected into its own capture.
        ([0x04, 0x04, 0x00, 0x09, 0x00], .fromLocal),
        ([0x05, 0x01, 0x04, 0x00, 0x02, 0x29, 0x07, 0x00, 0x02, 0x29], .toLocal),
        ([0x12, 0x04, 0x00, 0x02, 0x00], .fromLocal),
        ([0x13], .toLocal),
        ([0x0A, 0x08, 0x00], .fromLocal),
        ([0x0B] + (0..<60).map { UInt8($0) }, .toLocal),
        (
            [
                0x1D, 0x03, 0x00, 0x1E, 0x78, 0x00, 0x50, 0x00, 0x5D, 0x00, 0xEA, 0x07, 0x0B, 0x16, 0x09, 0x00, 0x00,
                0x48, 0x00,
            ], .toLocal
        ),
        ([0x1E], .fromLocal),
    ]

    /// What ``write(to:minimumBytes:datalink:sessions:)`` produced.
    public struct Summary: Sendable, Hashable {
        public var bytes: Int64
        public var sessions: Int
        /// ATT PDUs as logged (each session's PDUs count twice, once per controller).
        public var attPDUs: Int
        public var records: Int
    }

    /// The ATT sessions of one adapter in a capture, split at its connection events.
    public static func sessions(in events: [CaptureEvent], adapter: UInt16) -> [Session] {
        var out: [Session] = []
        for e in events {
            switch e {
            case .connected(let c) where c.adapter == adapter: out.append([])
            case .att(let p) where p.adapter == adapter:
                if out.isEmpty { out.append([]) }
                out[out.count - 1].append((p.pdu, p.direction))
            default: break
            }
        }
        return out.filter { !$0.isEmpty }
    }

    /// Writes a btsnoop file of at least `minimumBytes` to `sink`.
    ///
    /// - Parameters:
    ///   - datalink: `.monitor` (2001, two adapters) or `.uart` (1002, one controller: the central's log only).
    ///   - sessions: templates repeated round-robin; defaults to ``bloodPressureSession``.
    ///   - start: the first connection's time.
    public static func write<Sink: ByteSink>(
        to writer: inout BTSnoopWriter<Sink>, minimumBytes: Int64,
        sessions: [Session] = [bloodPressureSession],
        start: Timestamp = Timestamp(nanoseconds: 1_795_330_917_000_000_000)
    ) throws(CaptureError) -> Summary {
        let templates = sessions.filter { !$0.isEmpty }
        precondition(!templates.isEmpty, "at least one non-empty session")
        let twoControllers = writer.datalink == .monitor
        let centralAddress = BDAddress(littleEndian: [0x01, 0x00, 0x01, 0x01, 0xAA, 0x00])
        let peripheralAddress = BDAddress(littleEndian: [0x00, 0x00, 0x00, 0x01, 0xAA, 0x00])
        var summary = Summary(bytes: 16, sessions: 0, attPDUs: 0, records: 0)
        var t = start
        var handle: UInt16 = 1
        func emit(_ records: [HCIRecord], _ w: inout BTSnoopWriter<Sink>) throws(CaptureError) {
            for r in records {
                try w.write(r)
                summary.bytes += Int64(24 + r.payload.count + (w.datalink == .uart ? 1 : 0))
                summary.records += 1
            }
        }
        while summary.bytes < minimumBytes {
            let template = templates[summary.sessions % templates.count]
            var central = SessionRecorder(
                datalink: writer.datalink, adapter: twoControllers ? 1 : 0,
                localAddress: centralAddress, connectionHandle: handle)
            var peripheral = SessionRecorder(
                datalink: writer.datalink, adapter: 0,
                localAddress: peripheralAddress, connectionHandle: handle)
            if summary.sessions == 0 && twoControllers {
                try emit(central.announce(at: t) + peripheral.announce(at: t), &writer)
            } else {
                _ = central.announce(at: t)
                _ = peripheral.announce(at: t)
            }
            try emit(central.connected(peer: peripheralAddress, role: .central, at: t), &writer)
            if twoControllers {
                try emit(
                    peripheral.connected(peer: centralAddress, role: .peripheral, at: t + .microseconds(150)), &writer)
            }
            for (pdu, direction) in template {
                t = t + .milliseconds(3)
                try emit(try central.att(pdu, direction: direction, at: t), &writer)
                summary.attPDUs += 1
                if twoControllers {
                    let mirrored: ATTDirection = direction == .fromLocal ? .toLocal : .fromLocal
                    try emit(try peripheral.att(pdu, direction: mirrored, at: t + .microseconds(200)), &writer)
                    summary.attPDUs += 1
                }
            }
            t = t + .milliseconds(500)
            try emit(central.disconnected(reason: 0x13, at: t), &writer)
            if twoControllers { try emit(peripheral.disconnected(reason: 0x13, at: t + .microseconds(80)), &writer) }
            t = t + .milliseconds(1500)
            summary.sessions += 1
            handle = handle % 0x0EFF + 1
        }
        return summary
    }

    /// Writes a btsnoop file of at least `minimumBytes` at `path`.
    public static func write(
        path: String, minimumBytes: Int64, datalink: BTSnoopDatalink = .monitor,
        sessions: [Session] = [bloodPressureSession]
    ) throws(CaptureError) -> Summary {
        var writer = try BTSnoopWriter(path: path, datalink: datalink)
        let summary = try write(to: &writer, minimumBytes: minimumBytes, sessions: sessions)
        _ = try writer.finish()
        return summary
    }
}
