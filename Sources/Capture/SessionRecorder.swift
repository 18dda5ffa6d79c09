// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// Turns one LE session's ATT PDUs into the HCI records a real controller's log would hold.
///
/// Pure: each call returns the records to append (hand them to a ``BTSnoopWriter``). For the Linux
/// monitor datalink (2001) the first call also emits New Index, Open Index and Index Info for the
/// adapter, as `btmon` logs them. Then:
/// - ``connected(peer:peerType:role:at:)`` → HCI LE Enhanced Connection Complete (LE Meta 0x3E, sub 0x0A);
/// - ``att(_:direction:at:)`` → the L2CAP frame on CID 0x0004 in ACL packets of at most ``aclMTU``
///   data bytes (start packet boundary 0b00 host→controller, 0b10 controller→host; continuations
///   0b01), each host→controller packet followed by Number Of Completed Packets when enabled;
/// - ``disconnected(reason:at:)`` → HCI Disconnection Complete.
public struct SessionRecorder: Sendable {
    public let datalink: BTSnoopDatalink
    public let adapter: UInt16
    public let localAddress: BDAddress
    public var connectionHandle: UInt16
    /// Largest ACL data length per packet (an LE controller's default buffer is 27 bytes).
    public let aclMTU: Int
    public let numberOfCompletedPackets: Bool
    private var announced = false

    public init(
        datalink: BTSnoopDatalink = .monitor, adapter: UInt16 = 0, localAddress: BDAddress = .zero,
        connectionHandle: UInt16 = 0x0040, aclMTU: Int = 27, numberOfCompletedPackets: Bool = true
    ) {
        self.datalink = datalink
        self.adapter = adapter
        self.localAddress = localAddress
        self.connectionHandle = connectionHandle & 0x0FFF
        self.aclMTU = max(1, aclMTU)
        self.numberOfCompletedPackets = numberOfCompletedPackets
    }

    private func record(_ kind: HCIPacketKind, _ direction: HCIDirection, _ payload: [UInt8], _ t: Timestamp)
        -> HCIRecord
    {
        HCIRecord(timestamp: t, adapterIndex: adapter, direction: direction, kind: kind, payload: payload)
    }

    private func event(_ code: UInt8, _ params: [UInt8], _ t: Timestamp) -> HCIRecord {
        record(.event, .received, [code, UInt8(params.count)] + params, t)
    }

    /// New Index, Open Index, Index Info (monitor datalink only, once).
    public mutating func announce(at t: Timestamp) -> [HCIRecord] {
        guard datalink == .monitor, !announced else { return [] }
        announced = true
        var name = Array("hci\(adapter)".utf8.prefix(8))
        name += [UInt8](repeating: 0, count: 8 - name.count)
        var newIndex = ByteWriter()
        newIndex.write(UInt8(0))  // type: primary
        newIndex.write(UInt8(0))  // bus: virtual
        newIndex.write(contentsOf: localAddress.bytes)
        newIndex.write(contentsOf: name)
        var info = ByteWriter()
        info.write(contentsOf: localAddress.bytes)
        info.write(UInt16(0x05F1))  // manufacturer: The Linux Foundation
        return [
            record(.monitorNewIndex, .received, newIndex.bytes, t),
            record(.monitorOpenIndex, .received, [], t),
            record(.monitorIndexInfo, .received, info.bytes, t),
        ]
    }

    /// The link came up: LE Enhanced Connection Complete with the peer and the local role.
    public mutating func connected(
        peer: BDAddress, peerType: AddressType = .public, role: ConnectionRole,
        at t: Timestamp
    ) -> [HCIRecord] {
        var out = announce(at: t)
        var w = ByteWriter()
        w.write(UInt8(0x0A))  // LE Enhanced Connection Complete
        w.write(UInt8(0x00))  // status
        w.write(connectionHandle)
        w.write(UInt8(role == .central ? 0 : 1))
        w.write(peerType.rawValue)
        w.write(contentsOf: peer.bytes)
        w.write(contentsOf: [UInt8](repeating: 0, count: 12))  // local and peer resolvable private addresses
        w.write(UInt16(0x0028))  // interval 50 ms
        w.write(UInt16(0))  // latency
        w.write(UInt16(0x002A))  // supervision timeout 420 ms
        w.write(UInt8(0))  // central clock accuracy
        out.append(event(0x3E, w.bytes, t))
        return out
    }

    /// One ATT PDU, as the ACL packets (and completion events) the controller log shows.
    ///
    /// - Throws: `oversize_record` for a PDU longer than an L2CAP frame can carry (65535 bytes).
    public mutating func att(_ pdu: [UInt8], direction: ATTDirection, at t: Timestamp) throws(CaptureError)
        -> [HCIRecord]
    {
        guard pdu.count <= 0xFFFF else {
            throw CaptureError(.oversizeRecord, "an ATT PDU of \(pdu.count) bytes does not fit an L2CAP frame")
        }
        var out = announce(at: t)
        var frame = ByteWriter(capacity: pdu.count + 4)
        frame.write(UInt16(pdu.count))
        frame.write(ATTExtractor.attCID)
        frame.write(contentsOf: pdu)
        let sent = direction == .fromLocal || direction == .centralToPeripheral
        var start = 0
        while start < frame.bytes.count {
            let end = min(start + aclMTU, frame.bytes.count)
            let boundary: UInt16 = start > 0 ? 0b01 : (sent ? 0b00 : 0b10)
            var acl = ByteWriter(capacity: end - start + 4)
            acl.write(connectionHandle | boundary << 12)
            acl.write(UInt16(end - start))
            acl.write(contentsOf: frame.bytes[start..<end])
            out.append(record(.aclData, sent ? .sent : .received, acl.bytes, t))
            if sent && numberOfCompletedPackets {
                var p = ByteWriter()
                p.write(UInt8(1))
                p.write(connectionHandle)
                p.write(UInt16(1))
                out.append(event(0x13, p.bytes, t))
            }
            start = end
        }
        return out
    }

    /// The link went down: Disconnection Complete with `reason` (0x13 remote user terminated).
    public mutating func disconnected(reason: UInt8 = 0x13, at t: Timestamp) -> [HCIRecord] {
        var out = announce(at: t)
        var w = ByteWriter()
        w.write(UInt8(0))
        w.write(connectionHandle)
        w.write(reason)
        out.append(event(0x05, w.bytes, t))
        return out
    }
}
