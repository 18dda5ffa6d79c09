// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Testing
@testable import BlueZ
import Transport

@Suite("MGMT events and the pairing agent's answers")
struct MGMTTests {
    /// From a btvirt capture (shared/vmble sample, Debian 6.1.0-56): LE Just Works on hci0 asks
    /// user space to confirm.
    /// @ MGMT Event: User Confirmation Request (0x000f) plen 12 {0x0001} [hci0]
    ///   LE Address: 00:AA:01:01:00:01, Confirm hint: 0x01, Value: 0x00000000
    static let confirmRequest: [UInt8] = Hex.decode("0f00 0000 0c00 010001 01aa00 01 01 00000000")!

    @Test func parsesAUserConfirmationRequest() throws {
        let packet = try MGMTPacket(parsing: Self.confirmRequest)
        #expect(packet.code == 0x000F)
        #expect(packet.index == 0)
        let event = try MGMTEvent(packet)
        let peer = MGMTAddress(BluetoothAddress("00:AA:01:01:00:01")!, typeCode: 1)
        #expect(event == .userConfirmationRequest(peer, confirmHint: 1, value: 0))
    }

    @Test func agentAcceptsConfirmationsWithTheExactAddress() {
        let (reply, line, _) = PairingAgent.response(to: Self.confirmRequest, passkey: 0, adapter: nil)
        // User Confirmation Reply (0x001c) [hci0] plen 7: 00:AA:01:01:00:01, LE public
        #expect(reply?.encoded == Hex.decode("1c00 0000 0700 010001 01aa00 01"))
        #expect(line == "agent: hci0 confirm 00:AA:01:01:00:01 (LE public) hint=1 value=0 → accept")
    }

    @Test func agentWithAPeerLeavesOtherDevicesAlone() throws {
        let ours = BluetoothAddress("00:AA:01:01:00:01")!
        #expect(PairingAgent.response(to: Self.confirmRequest, passkey: 0, adapter: nil, peer: ours).reply != nil)
        let (reply, line, _) = PairingAgent.response(
            to: Self.confirmRequest, passkey: 0, adapter: nil, peer: BluetoothAddress("00:AA:01:01:00:02")!)
        #expect(reply == nil)
        #expect(
            line
                == "agent: hci0 pairing question for 00:AA:01:01:00:01 (LE public) left unanswered: cuff answers only for 00:AA:01:01:00:02"
        )
        let passkey = try #require(Hex.decode("1000 0100 0700 010000eeffc0 02"))
        #expect(PairingAgent.response(to: passkey, passkey: 1, adapter: nil, peer: ours).reply == nil)
    }

    @Test func agentAnswersPasskeyRequests() throws {
        // User Passkey Request (0x0010) [hci1]: C0:FF:EE:00:00:01 LE random
        let request = try #require(Hex.decode("1000 0100 0700 010000eeffc0 02"))
        let (reply, _, _) = PairingAgent.response(to: request, passkey: 123456, adapter: nil)
        // User Passkey Reply (0x001e) plen 11: address, type, passkey 123456 = 0x0001E240
        #expect(reply?.encoded == Hex.decode("1e00 0100 0b00 010000eeffc0 02 40e20100"))
    }

    @Test func agentIgnoresOtherAdaptersAndOtherEvents() throws {
        #expect(
            PairingAgent.response(to: Self.confirmRequest, passkey: 0, adapter: BluetoothAdapter(index: 1)).reply == nil
        )
        #expect(
            PairingAgent.response(to: Self.confirmRequest, passkey: 0, adapter: BluetoothAdapter(index: 0)).reply != nil
        )
        // Authentication Failed (0x0011): status 0x05
        let failed = try #require(Hex.decode("1100 0000 0800 010001 01aa00 01 05"))
        let (reply, line, _) = PairingAgent.response(to: failed, passkey: 0, adapter: nil)
        #expect(reply == nil)
        #expect(line == "agent: hci0 pairing with 00:AA:01:01:00:01 (LE public) failed: authentication failed (0x05)")
        // Command Complete for our reply: logged, no answer.
        let complete = try #require(Hex.decode("0100 0000 0a00 1c00 00 010001 01aa00 01"))
        #expect(
            PairingAgent.response(to: complete, passkey: 0, adapter: nil).line
                == "agent: hci0 reply 0x1c → success (0x00)")
        // Garbage: nothing.
        #expect(PairingAgent.response(to: [0x0F, 0x00], passkey: 0, adapter: nil).reply == nil)
    }

    @Test func otherEventsDecode() throws {
        // Device Disconnected (0x000c): reason 0x03 (remote)
        let d = try MGMTEvent(MGMTPacket(parsing: Hex.decode("0c00 0100 0800 000000 01aa00 01 03")!))
        #expect(d == .deviceDisconnected(MGMTAddress(BluetoothAddress("00:AA:01:00:00:00")!, typeCode: 1), reason: 3))
        // New Long Term Key (0x000a): store hint 0, then the key's address
        let k = try MGMTEvent(MGMTPacket(parsing: Hex.decode("0a00 0000 0800 00 010001 01aa00 01")!))
        #expect(k == .newLongTermKey(MGMTAddress(BluetoothAddress("00:AA:01:01:00:01")!, typeCode: 1), storeHint: 0))
    }

    @Test func truncationIsAnErrorNotACrash() throws {
        for n in 0..<Self.confirmRequest.count {
            let prefix = Array(Self.confirmRequest.prefix(n))
            #expect(throws: MGMTParseError.self) { _ = try MGMTPacket(parsing: prefix) }
        }
        // Header fine, body too short for a confirmation request.
        let short = MGMTPacket(code: 0x000F, index: 0, parameters: [1, 2, 3])
        #expect(throws: MGMTParseError.self) { _ = try MGMTEvent(short) }
        #expect(
            MGMTPacket(code: 0x0001, index: 0xFFFF, parameters: [1]).encoded == [
                0x01, 0x00, 0xFF, 0xFF, 0x01, 0x00, 0x01,
            ])
    }
}
