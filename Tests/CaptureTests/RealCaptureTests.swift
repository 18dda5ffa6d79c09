// SPDX-License-Identifier: GPL-2.0-or-later

import Capture
import CuffCore
import Foundation
import Testing

/// The shared btmon capture: two virtual controllers (hci0 peripheral, hci1 central) in one
/// datalink-2001 file, so every ATT PDU appears twice, once per controller index.
@Suite struct RealCaptureTests {
    static let available = FileManager.default.fileExists(atPath: sharedSample)

    @Test(.enabled(if: available)) func recordCountAndFirstRecord() throws {
        var reader = try CaptureReader(path: sharedSample)
        let records = try reader.readAll()
        // 4063: counted with a 5-line Python loop over the BE32 included lengths; `tshark -r` lists 4063 frames.
        #expect(records.count == 4063)
        #expect(reader.format == .btsnoop)
        #expect(reader.datalink == 2001)
        let first = try #require(records.first)
        // Record 1: System Note on index 0xffff, "Linux version 6.1.0-56-amd64 (x86_64)".
        #expect(first.kind == .monitorNote)
        #expect(first.adapterIndex == 0xFFFF)
        #expect(first.fileOffset == 16)
        #expect(String(decoding: first.payload.prefix(13), as: UTF8.self) == "Linux version")
        // `tshark -r … -c 1 -T fields -e frame.time_epoch` prints 1795330917.473639000.
        #expect(first.timestamp.nanoseconds == 1_795_330_917_473_639_000)
        #expect(records[2].kind == .monitorNewIndex)
        #expect(records[2].adapterIndex == 1)
    }

    @Test(.enabled(if: available)) func attPerAdapterMatchesBtmon() throws {
        var reader = try CaptureReader(path: sharedSample)
        let events = try extract(try reader.readAll(), strict: true)
        let att = events.compactMap(\.att)
        // `btmon -r` shows 52 "ATT:" lines: per controller 8 MTU requests, 6 responses,
        // 6 indications, 6 confirmations.
        #expect(att.count == 52)
        #expect(att.filter { $0.adapter == 0 }.count == 26)
        #expect(att.filter { $0.adapter == 1 }.count == 26)
        #expect(att.filter { $0.adapter == 0 && $0.direction == .toLocal }.count == 14)
        #expect(att.filter { $0.adapter == 1 && $0.direction == .fromLocal }.count == 14)
        #expect(att.allSatisfy { $0.connectionHandle == 42 && $0.connectionKnown })

        // The first eight, as `btmon -r` prints them (first session, handle 42):
        //   < ACL Data TX [hci1] 2.888701  ATT: Exchange MTU Request, Client RX MTU: 517
        //   > ACL Data RX [hci0] 2.889237  (same)
        //   < ACL Data TX [hci0] 2.891573  ATT: Exchange MTU Response, Server RX MTU: 247
        //   > ACL Data RX [hci1] 2.891772  (same)
        //   < ACL Data TX [hci0] 2.892928  ATT: Handle Value Indication, Handle 0x0003, Data 00780050005d00
        //   > ACL Data RX [hci1] 2.893079  (same)
        //   < ACL Data TX [hci1] 2.895717  ATT: Handle Value Confirmation
        //   > ACL Data RX [hci0] 2.895897  (same)
        let expected: [(UInt16, ATTDirection, [UInt8], Int64)] = [
            (1, .fromLocal, hex("02 05 02"), 2_888_701),
            (0, .toLocal, hex("02 05 02"), 2_889_237),
            (0, .fromLocal, hex("03 f7 00"), 2_891_573),
            (1, .toLocal, hex("03 f7 00"), 2_891_772),
            (0, .fromLocal, hex("1d 03 00 00 78 00 50 00 5d 00"), 2_892_928),
            (1, .toLocal, hex("1d 03 00 00 78 00 50 00 5d 00"), 2_893_079),
            (1, .fromLocal, hex("1e"), 2_895_717),
            (0, .toLocal, hex("1e"), 2_895_897),
        ]
        // btmon's times are relative to the first record (0.473639 s after the epoch second above).
        let base: Int64 = 1_795_330_917_000_000
        for (packet, (adapter, direction, pdu, relativeMicros)) in zip(att.prefix(8), expected) {
            #expect(packet.adapter == adapter)
            #expect(packet.direction == direction)
            #expect(packet.pdu == pdu)
            #expect(packet.timestamp.nanoseconds == (base + relativeMicros) * 1000)
        }
        #expect(att[0].fileOffset == 2690)

        let connected = events.compactMap { e -> ConnectionInfo? in if case .connected(let c) = e { c } else { nil } }
        let disconnected = events.compactMap { e -> Disconnection? in
            if case .disconnected(let d) = e { d } else { nil }
        }
        // btmon: 8 LE Connection Complete and 7 Disconnect Complete per controller; reasons 0x13 ×5, 0x15, 0x05.
        #expect(connected.filter { $0.adapter == 0 }.count == 8)
        #expect(connected.filter { $0.adapter == 1 }.count == 8)
        #expect(
            connected.filter { $0.adapter == 0 }.allSatisfy {
                $0.role == .peripheral && $0.peerAddress.description == "00:AA:01:01:00:01"
            })
        #expect(
            connected.filter { $0.adapter == 1 }.allSatisfy {
                $0.role == .central && $0.peerAddress.description == "00:AA:01:00:00:00"
            })
        // btmon's 14 Disconnection Completes, and the two links still open when the VM removed
        // both controllers (Delete Index), ended there.
        let removed = disconnected.filter { $0.cause != nil }
        #expect(removed.map(\.adapter).sorted() == [0, 1] && removed.allSatisfy { $0.cause!.hasSuffix("was removed") })
        let completes = disconnected.filter { $0.cause == nil }
        #expect(completes.count == 14)
        #expect(
            completes.map(\.reason).sorted() == [
                5, 5, 0x13, 0x13, 0x13, 0x13, 0x13, 0x13, 0x13, 0x13, 0x13, 0x13, 0x15, 0x15,
            ])
    }

    /// Each session's PDUs per controller equal what the two test programs logged in results-all-scenarios.jsonl.
    @Test(.enabled(if: available)) func sessionsMatchCompanionResults() throws {
        let jsonl = try String(contentsOfFile: sharedResults, encoding: .utf8)
        var expectedCentral: [[String]] = []
        var expectedPeripheral: [[String]] = []
        for line in jsonl.split(separator: "\n") {
            let obj = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let c = (obj["central"] as? [String: Any])?["pdus"] as? [String]
            let p = (obj["peripheral"] as? [String: Any])?["pdus"] as? [String]
            expectedCentral.append(c ?? [])
            expectedPeripheral.append(p ?? [])
        }
        #expect(expectedCentral.count == 8)

        var reader = try CaptureReader(path: sharedSample)
        let events = try extract(try reader.readAll())
        // Split each controller's ATT into sessions at its connection events.
        var sessions: [UInt16: [[String]]] = [0: [], 1: []]
        for e in events {
            switch e {
            case .connected(let c): sessions[c.adapter, default: []].append([])
            case .att(let p):
                let text =
                    (p.direction == .fromLocal ? "tx " : "rx ") + p.pdu.map { Hex.encode([$0]) }.joined(separator: " ")
                sessions[p.adapter]![sessions[p.adapter]!.count - 1].append(text)
            default: break
            }
        }
        #expect(sessions[1]!.count == 8)
        #expect(sessions[0]!.count == 8)
        // The programs logged their own PDUs; in the two bluetoothd-with-security scenarios (5 and 7)
        // the capture also holds one more MTU request after them (bluetoothd's own GATT client on the
        // central's host, unanswered), and the two "noagent" scenarios (3 and 6), whose pairing was
        // refused, carry no ATT at all. btmon agrees: 8 MTU requests but 6 responses per controller.
        for i in 0..<8 {
            let extraCentral = i == 5 || i == 7 ? ["tx 02 05 02"] : []
            let extraPeripheral = i == 5 || i == 7 ? ["rx 02 05 02"] : []
            #expect(sessions[1]![i] == expectedCentral[i] + extraCentral, "central session \(i)")
            #expect(sessions[0]![i] == expectedPeripheral[i] + extraPeripheral, "peripheral session \(i)")
        }
        #expect(expectedCentral[3].isEmpty && expectedCentral[6].isEmpty)
    }
}
