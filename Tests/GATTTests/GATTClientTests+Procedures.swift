// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Testing
@testable import GATT

let id1 = GATTRequestID(rawValue: 1)
let id2 = GATTRequestID(rawValue: 2)

func csend(_ hex: String) -> GATTClientAction { .send(h(hex)) }

/// Client and server in memory: reads, writes, subscriptions, notifications and indications.
@Suite struct GATTClientLinkTests {
    @Test func exchangeMTUThenShortRead() {
        var link = InMemoryLink()
        let mtu = link.client.exchangeMTU(now: t0)
        link.client(mtu.actions)
        #expect(link.result(mtu.id) == .success(.mtu(247)))
        #expect(link.client.mtu == 247 && link.server.mtu == 247)
        let read = link.client.read(3, now: t0)
        link.client(read.actions)
        #expect(link.result(read.id) == .success(.value(deviceNameValue)))
        #expect(link.clientSent.map { Hex.encode($0) } == ["02f700", "0a0300"])
    }

    @Test func longReadUsesReadBlob() {
        var link = InMemoryLink()
        let read = link.client.read(3, now: t0)
        link.client(read.actions)
        #expect(link.clientSent.map { Hex.encode($0) } == ["0a0300", "0c03001600"])
        #expect(link.result(read.id) == .success(.value(deviceNameValue)))
    }

    @Test func valueOfExactlyMTUMinus1() {
        var link = InMemoryLink()
        link.server.setValue(handle: 3, Array(deviceNameValue.prefix(22)))
        let read = link.client.read(3, now: t0)
        link.client(read.actions)
        #expect(link.clientSent.map { Hex.encode($0) } == ["0a0300", "0c03001600"])
        #expect(link.result(read.id) == .success(.value(Array(deviceNameValue.prefix(22)))))
    }

    @Test func proceduresRunOneAtATime() {
        var c = GATTClient()
        let a = c.read(3, now: t0)
        let b = c.write(0x0F, [1], now: t0)
        #expect(a.actions == [csend("0a 0300")])
        #expect(b.actions == [], "waits for the first request's answer")
        #expect(c.pendingProcedures == 2)
        #expect(c.receive(h("0b 41"), now: t0) == [.completed(a.id, .success(.value([0x41]))), csend("12 0f00 01")])
        #expect(c.receive(h("13"), now: t0) == [.completed(b.id, .success(.written))])
    }

    @Test func writesAndSubscriptions() {
        var link = InMemoryLink()
        let sub = link.client.subscribe(cccdHandle: 0x10, notify: false, indicate: true, now: t0)
        link.client(sub.actions)
        let write = link.client.write(0x0F, [0x01, 0x02], now: t0)
        link.client(write.actions)
        let command = link.client.writeWithoutResponse(0x0F, [0x03])
        #expect(command.actions == [csend("52 0f00 03"), .completed(command.id, .success(.written))])
        link.client(command.actions)
        #expect(link.result(sub.id) == .success(.written))
        #expect(link.result(write.id) == .success(.written))
        #expect(
            link.serverEvents == [
                .subscriptionChanged(valueHandle: 0x0F, uuid: vendorUUID, notify: false, indicate: true),
                .written(handle: 0x0F, uuid: vendorUUID, value: [1, 2], withResponse: true),
                .written(handle: 0x0F, uuid: vendorUUID, value: [3], withResponse: false),
            ])
        let refused = link.client.write(0x06, [1], now: t0)
        link.client(refused.actions)
        #expect(link.result(refused.id) == .failure(GATTClientError(.attError, "", attError: .writeNotPermitted)))
    }

    @Test func subscribeWithoutCCCD() {
        var c = GATTClient()
        let feature = expectedProfile.characteristic(BluetoothUUID(0x2A49))!
        let r = c.subscribe(feature, notify: true, indicate: false, now: t0)
        #expect(r.actions == [.completed(r.id, .failure(GATTClientError(.noCCCD, "")))])
        let bpm = expectedProfile.characteristic(BluetoothUUID(0x2A35))!
        #expect(c.subscribe(bpm, notify: false, indicate: true, now: t0).actions == [csend("12 0700 0200")])
    }

    @Test func valueTooLongForOneWrite() {
        var c = GATTClient()
        let big = [UInt8](repeating: 0, count: 21)
        let w = c.write(0x0F, big, now: t0)
        #expect(w.actions == [.completed(w.id, .failure(GATTClientError(.valueTooLong, "")))])
        let cmd = c.writeWithoutResponse(0x0F, big)
        #expect(cmd.actions == [.completed(cmd.id, .failure(GATTClientError(.valueTooLong, "")))])
        #expect(c.write(0x0F, Array(big.prefix(20)), now: t0).actions == [.send([0x12, 0x0F, 0x00] + big.prefix(20))])
    }

    @Test func notifyIndicateAndConfirmByHand() {
        var link = InMemoryLink()
        let discover = link.client.discover(now: t0)
        link.client(discover.actions)
        guard case let .success(.profile(profile)) = link.result(discover.id) else { Issue.record("discovery"); return }
        link.client(
            link.client.subscribe(
                profile.characteristic(BluetoothUUID(0x2A35))!, notify: false, indicate: true, now: t0
            ).actions)
        link.client(
            link.client.subscribe(
                profile.characteristic(BluetoothUUID(0x2A36))!, notify: true, indicate: false, now: t0
            ).actions)
        link.clientEvents = []
        link.serverEvents = []

        link.server(link.server.notify(handle: 9, value: [0x04, 0x22]))
        link.server(link.server.indicate(handle: 6, value: [0x1E, 0x01], now: t0))
        link.server(link.server.indicate(handle: 6, value: [0x1E, 0x02], now: t0))
        #expect(
            link.clientEvents == [
                .notification(handle: 9, value: [0x04, 0x22]), .indication(handle: 6, value: [0x1E, 0x01]),
            ])
        #expect(link.client.indicationPending)
        #expect(link.server.queuedIndications == 1, "the second waits for the confirmation")

        // The application stores the record, then confirms; the next indication follows.
        link.client(link.client.confirmIndication())
        #expect(link.serverEvents == [.indicationConfirmed(handle: 6)])
        #expect(link.clientEvents.last == .indication(handle: 6, value: [0x1E, 0x02]))
        link.client(link.client.confirmIndication())
        #expect(link.serverEvents == [.indicationConfirmed(handle: 6), .indicationConfirmed(handle: 6)])
        #expect(link.client.confirmIndication() == [], "nothing left to confirm")
        #expect(link.server.nextDeadline == nil)
    }

    @Test func clientAnswersServerRequests() {
        var c = GATTClient()
        #expect(c.receive(h("0a 0100"), now: t0) == [csend("01 0a 0000 06")])
        #expect(c.receive(h("3f"), now: t0) == [csend("01 3f 0000 06")])
        #expect(c.receive(h("7f 01"), now: t0) == [])
        #expect(c.receive(h("02 4000"), now: t0) == [csend("03 f700")])
        #expect(c.mtu == 64)
    }
}

/// Security errors, timeouts and protocol violations, with scripted server bytes.
@Suite struct GATTClientFailureTests {
    @Test func securityRetryAgainstTheServer() {
        var link = InMemoryLink()
        let read = link.client.read(0x0C, now: t0)
        link.client(read.actions)
        #expect(link.clientEvents == [.raiseSecurity(to: .medium)])
        #expect(link.client.nextDeadline == nil, "no ATT transaction while pairing")
        link.server.linkSecurityChanged(level: .medium)
        link.client(link.client.securityRaised(level: .medium, now: t0 + .seconds(5)))
        #expect(link.clientSent.map { Hex.encode($0) } == ["0a0c00", "0a0c00"])
        #expect(link.result(read.id) == .success(.value([0x21, 0x00])))
        #expect(link.client.securityLevel == .medium)
    }

    @Test func securityLevelsStepUp() {
        var c = GATTClient()
        let r = c.read(0x0C, now: t0)
        #expect(c.receive(h("01 0a 0c00 0f"), now: t0) == [.raiseSecurity(to: .medium)])
        #expect(c.securityRaised(level: .medium, now: t0) == [csend("0a 0c00")])
        #expect(c.receive(h("01 0a 0c00 05"), now: t0) == [.raiseSecurity(to: .high)])
        #expect(c.securityRaised(level: .high, now: t0) == [csend("0a 0c00")])
        #expect(c.receive(h("01 0a 0c00 05"), now: t0) == [.raiseSecurity(to: .fips)])
        #expect(c.securityRaised(level: .fips, now: t0) == [csend("0a 0c00")])
        #expect(
            c.receive(h("01 0a 0c00 05"), now: t0)
                == [.completed(r.id, .failure(GATTClientError(.attError, "", attError: .insufficientAuthentication)))],
            "past fips")
    }

    @Test func insufficientEncryptionOnAnEncryptedLinkFails() {
        var c = GATTClient(securityLevel: .medium)
        let r = c.read(0x0C, now: t0)
        #expect(
            c.receive(h("01 0a 0c00 0f"), now: t0)
                == [.completed(r.id, .failure(GATTClientError(.attError, "", attError: .insufficientEncryption)))])
    }

    @Test func keySizeStepsUp() {
        var c = GATTClient(securityLevel: .medium)
        _ = c.read(0x0C, now: t0)
        #expect(c.receive(h("01 0a 0c00 0c"), now: t0) == [.raiseSecurity(to: .high)])
    }

    @Test func securityRefusedOrNotReached() {
        var c = GATTClient()
        let a = c.read(0x0C, now: t0)
        _ = c.read(0x03, now: t0)
        _ = c.receive(h("01 0a 0c00 05"), now: t0)
        #expect(
            c.securityRefused(now: t0) == [
                .completed(
                    a.id, .failure(GATTClientError(.securityRefused, "", attError: .insufficientAuthentication))),
                csend("0a 0300"),
            ])
        _ = c.receive(h("0b 00"), now: t0)
        let d = c.read(0x0C, now: t0)
        _ = c.receive(h("01 0a 0c00 05"), now: t0)
        #expect(
            c.securityRaised(level: .low, now: t0)
                == [.completed(d.id, .failure(GATTClientError(.attError, "", attError: .insufficientAuthentication)))])
        #expect(c.securityRefused(now: t0) == [], "nothing waits any more")
    }

    @Test func transactionTimeout() {
        var c = GATTClient()
        let a = c.read(3, now: t0)
        let b = c.read(4, now: t0)
        #expect(c.nextDeadline == t0 + .seconds(30))
        #expect(c.tick(now: t0 + .milliseconds(29_999)) == [])
        #expect(
            c.tick(now: t0 + .seconds(30)) == [
                .completed(a.id, .failure(GATTClientError(.timeout, ""))),
                .completed(b.id, .failure(GATTClientError(.bearerFailed, ""))),
                .failed(GATTClientError(.timeout, "")),
            ])
        #expect(c.failure?.code == .timeout)
        #expect(c.failure?.message == "no answer to Read Request (0x0A) within 30 s")
        let late = c.read(3, now: t0 + .seconds(31))
        #expect(late.actions == [.completed(late.id, .failure(GATTClientError(.bearerFailed, "")))])
        #expect(c.receive(h("0b 00"), now: t0 + .seconds(31)) == [], "the bearer is dead")
        #expect(c.tick(now: t0 + .seconds(99)) == [])
    }

    @Test func lateAnswerIsATimeout() {
        var c = GATTClient()
        let a = c.read(3, now: t0)
        #expect(
            c.receive(h("0b 00"), now: t0 + .seconds(31))
                == [.completed(a.id, .failure(GATTClientError(.timeout, ""))), .failed(GATTClientError(.timeout, ""))])
    }

    @Test func wrongOpcodeAnswer() {
        var c = GATTClient()
        let a = c.read(3, now: t0)
        let actions = c.receive(h("13"), now: t0)
        #expect(
            actions == [
                .completed(a.id, .failure(GATTClientError(.unexpectedResponse, ""))),
                .failed(GATTClientError(.unexpectedResponse, "")),
            ])
        #expect(c.failure?.message == "Write Response (0x13) in answer to Read Request (0x0A)")
    }

    @Test func errorResponseForAnotherRequest() {
        var c = GATTClient()
        _ = c.read(3, now: t0)
        #expect(c.receive(h("01 12 0300 03"), now: t0).last == .failed(GATTClientError(.unexpectedResponse, "")))
    }

    @Test func unsolicitedResponse() {
        var c = GATTClient()
        #expect(c.receive(h("0b 0102"), now: t0) == [.failed(GATTClientError(.unexpectedResponse, ""))])
        #expect(c.failure?.message == "unsolicited Read Response (0x0B): no request is outstanding")
        var d = GATTClient()
        #expect(
            d.receive(h("1e"), now: t0) == [.failed(GATTClientError(.unexpectedResponse, ""))],
            "a confirmation sent to a client")
    }

    @Test func responseWhileWaitingForSecurity() {
        var c = GATTClient()
        _ = c.read(0x0C, now: t0)
        _ = c.receive(h("01 0a 0c00 05"), now: t0)
        #expect(c.receive(h("0b 00"), now: t0).last == .failed(GATTClientError(.unexpectedResponse, "")))
    }

    @Test func pduLargerThanMTU() {
        var c = GATTClient()
        let pdu = [0x1B, 0x09, 0x00] + [UInt8](repeating: 0, count: 21)  // 24 bytes, MTU 23
        #expect(c.receive(pdu, now: t0) == [.failed(GATTClientError(.pduTooLarge, ""))])
        #expect(c.failure?.message == "24-byte PDU (opcode 0x1B) exceeds ATT_MTU 23")
    }

    @Test func malformedPDU() {
        var c = GATTClient()
        _ = c.read(3, now: t0)
        let actions = c.receive(h("09 07 0200"), now: t0)
        #expect(actions.last == .failed(GATTClientError(.malformedPDU, "")))
        var d = GATTClient()
        #expect(d.receive([], now: t0) == [.failed(GATTClientError(.malformedPDU, ""))])
    }

    @Test func indicationFloodWithoutConfirmations() {
        var c = GATTClient()
        #expect(c.receive(h("1d 0600 01"), now: t0) == [.indication(handle: 6, value: [1])])
        #expect(
            c.receive(h("1b 0900 02"), now: t0) == [.notification(handle: 9, value: [2])], "notifications still flow")
        let second = c.receive(h("1d 0600 02"), now: t0)
        #expect(second == [.failed(GATTClientError(.unconfirmedIndication, ""))])
        #expect(c.failure?.message == "indication of 0x0006 arrived before the previous one was confirmed")
        for i in 3..<100 { #expect(c.receive([0x1D, 0x06, 0x00, UInt8(i)], now: t0) == []) }
        #expect(c.confirmIndication() == [], "the bearer is dead: nothing goes out")
    }

    @Test func mtuNotSupported() {
        var c = GATTClient()
        let m = c.exchangeMTU(now: t0)
        #expect(m.actions == [csend("02 f700")])
        #expect(c.receive(h("01 02 0000 06"), now: t0) == [.completed(m.id, .success(.mtu(23)))])
    }

    @Test func readBlobEndsOnAttributeNotLong() {
        var c = GATTClient()
        let r = c.read(3, now: t0)
        let full = [UInt8](repeating: 0x55, count: 22)
        #expect(c.receive([0x0B] + full, now: t0) == [csend("0c 0300 1600")])
        #expect(c.receive(h("01 0c 0300 0b"), now: t0) == [.completed(r.id, .success(.value(full)))])
    }

    @Test func longReadStopsAt512Bytes() {
        var c = GATTClient()
        let r = c.read(3, now: t0)
        let part = [UInt8](repeating: 0xAA, count: 22)
        var actions = c.receive([0x0B] + part, now: t0)
        var rounds = 0
        while case let .send(bytes)? = actions.first, bytes.first == 0x0C, rounds < 100 {
            rounds += 1
            actions = c.receive([0x0D] + part, now: t0)
        }
        #expect(rounds == 23, "22 + 23 × 22 = 528 bytes offered")
        #expect(actions == [.completed(r.id, .success(.value([UInt8](repeating: 0xAA, count: 512))))])
    }
}

@Suite struct GATTClientQueueTests {
    @Test func manyProceduresThatFailAtOnceDoNotRecurse() {
        var c = GATTClient()
        let first = c.read(3, now: t0)
        let big = [UInt8](repeating: 0, count: 100)
        let ids = (0..<20_000).map { _ in c.write(0x0F, big, now: t0).id }
        let last = c.read(4, now: t0)
        #expect(c.pendingProcedures == 20_002)
        let actions = c.receive(h("0b 00"), now: t0)
        #expect(actions.count == 20_002)
        #expect(actions.first == .completed(first.id, .success(.value([0]))))
        #expect(actions[1] == .completed(ids[0], .failure(GATTClientError(.valueTooLong, ""))))
        #expect(actions.last == csend("0a 0400"))
        #expect(last.actions == [])
    }
}
