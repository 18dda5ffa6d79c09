// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Testing
@testable import GATT

let expectedProfile = GATTProfile(services: [
    .init(
        uuid: .genericAccess, handle: 1, endHandle: 3,
        characteristics: [
            .init(uuid: .deviceName, properties: .read, declarationHandle: 2, valueHandle: 3)
        ]),
    .init(
        uuid: BluetoothUUID(0x1810), handle: 4, endHandle: 0x0C,
        characteristics: [
            .init(
                uuid: BluetoothUUID(0x2A35), properties: .indicate, declarationHandle: 5, valueHandle: 6, cccdHandle: 7,
                descriptors: [.init(handle: 7, uuid: .clientCharacteristicConfiguration)]),
            .init(
                uuid: BluetoothUUID(0x2A36), properties: .notify, declarationHandle: 8, valueHandle: 9,
                cccdHandle: 0x0A,
                descriptors: [.init(handle: 0x0A, uuid: .clientCharacteristicConfiguration)]),
            .init(uuid: BluetoothUUID(0x2A49), properties: .read, declarationHandle: 0x0B, valueHandle: 0x0C),
        ]),
    .init(
        uuid: vendorService, handle: 0x0D, endHandle: 0x10,
        characteristics: [
            .init(
                uuid: vendorUUID, properties: [.write, .writeWithoutResponse, .indicate], declarationHandle: 0x0E,
                valueHandle: 0x0F, cccdHandle: 0x10,
                descriptors: [.init(handle: 0x10, uuid: .clientCharacteristicConfiguration)])
        ]),
])

@Suite struct GATTClientDiscoveryTests {
    @Test func exactRequestsAgainstTheServer() throws {
        var link = InMemoryLink()
        let (id, actions) = link.client.discover(now: t0)
        link.client(actions)
        #expect(
            link.clientSent.map { Hex.encode($0) } == [
                "10" + "0100" + "ffff" + "0028",  // primary services from 0x0001
                "10" + "0d00" + "ffff" + "0028",  // after 0x000C (the 128-bit service has another length)
                "10" + "1100" + "ffff" + "0028",  // after 0x0010: Attribute Not Found ends the loop
                "08" + "0200" + "0300" + "0328",  // GAP characteristics
                "08" + "0500" + "0c00" + "0328",  // BLS characteristics: all three in one answer
                "08" + "0e00" + "1000" + "0328",  // vendor characteristics
                "08" + "1000" + "1000" + "0328",  // after the control point's value: Attribute Not Found
                "04" + "0700" + "0700",  // BPM descriptors
                "04" + "0a00" + "0a00",  // ICP descriptors
                "04" + "1000" + "1000",  // control point descriptors
            ])
        #expect(link.result(id) == .success(.profile(expectedProfile)))
        #expect(link.client.pendingProcedures == 0 && link.client.nextDeadline == nil)
    }

    @Test func filteredDiscovery() {
        var link = InMemoryLink()
        let (id, actions) = link.client.discover(services: [BluetoothUUID(0x1810)], now: t0)
        link.client(actions)
        guard case let .success(.profile(profile)) = link.result(id) else { Issue.record("no profile"); return }
        #expect(profile.services.map(\.uuid) == [BluetoothUUID(0x1810)])
        #expect(profile.characteristic(BluetoothUUID(0x2A35))?.cccdHandle == 7)
        #expect(profile.characteristic(valueHandle: 9)?.uuid == BluetoothUUID(0x2A36))
        #expect(link.clientSent.count == 6, "3 for services, 1 for BLS characteristics, 2 for CCCDs")
    }

    /// Scripted peer answers that do not move forward must end discovery, never loop.
    @Test func nonAdvancingServiceRanges() {
        var c = GATTClient()
        #expect(c.discover(now: t0).actions == [send("10 0100 ffff 0028").asClient])
        #expect(c.receive(h("11 06 0100 0500 0018"), now: t0) == [send("10 0600 ffff 0028").asClient])
        let again = c.receive(h("11 06 0100 0500 0018"), now: t0)
        #expect(again == [.completed(GATTRequestID(rawValue: 1), .failure(GATTClientError(.invalidResponse, "")))])
        guard case let .completed(_, .failure(e)) = again.first else { return }
        #expect(e.message == "service group 0x0001-0x0005 does not advance past 0x0005")
        #expect(c.failure == nil, "a confused peer fails the procedure, not the bearer")

        var d = GATTClient()
        _ = d.discover(now: t0)
        #expect(
            d.receive(h("11 06 0600 0500 0018"), now: t0)
                == [.completed(GATTRequestID(rawValue: 1), .failure(GATTClientError(.invalidResponse, "")))],
            "end < start")
    }

    @Test func groupEndingAt0xFFFFStopsServiceDiscovery() {
        var c = GATTClient()
        _ = c.discover(now: t0)
        #expect(c.receive(h("11 06 0100 ffff 1018"), now: t0) == [send("08 0200 ffff 0328").asClient])
        // A declaration at or before the cursor again: stop.
        #expect(c.receive(h("09 07 0200 20 0300 352a"), now: t0) == [send("08 0400 ffff 0328").asClient])
        #expect(
            c.receive(h("09 07 0200 20 0300 352a"), now: t0)
                == [.completed(GATTRequestID(rawValue: 1), .failure(GATTClientError(.invalidResponse, "")))])
    }

    @Test func badCharacteristicDeclaration() {
        var c = GATTClient()
        _ = c.discover(now: t0)
        _ = c.receive(h("11 06 0100 0500 1018"), now: t0)
        #expect(c.receive(h("01 10 0600 0a"), now: t0) == [send("08 0200 0500 0328").asClient])
        // Value handle before the declaration, then a 4-byte declaration value.
        #expect(
            c.receive(h("09 07 0300 20 0200 352a"), now: t0)
                == [.completed(GATTRequestID(rawValue: 1), .failure(GATTClientError(.invalidResponse, "")))])
        var d = GATTClient()
        _ = d.discover(now: t0)
        _ = d.receive(h("11 06 0100 0500 1018"), now: t0)
        _ = d.receive(h("01 10 0600 0a"), now: t0)
        #expect(
            d.receive(h("09 06 0200 20 0300 35"), now: t0)
                == [.completed(GATTRequestID(rawValue: 1), .failure(GATTClientError(.invalidResponse, "")))])
    }

    @Test func descriptorOutsideRange() {
        var c = GATTClient()
        _ = c.discover(now: t0)
        _ = c.receive(h("11 06 0100 0400 1018"), now: t0)
        _ = c.receive(h("01 10 0500 0a"), now: t0)
        #expect(c.receive(h("09 07 0200 20 0300 352a"), now: t0) == [send("08 0400 0400 0328").asClient])
        #expect(c.receive(h("01 08 0400 0a"), now: t0) == [send("04 0400 0400").asClient])
        #expect(
            c.receive(h("05 01 0500 0229"), now: t0)
                == [.completed(GATTRequestID(rawValue: 1), .failure(GATTClientError(.invalidResponse, "")))])
    }

    @Test func otherErrorsFailDiscovery() {
        var c = GATTClient()
        _ = c.discover(now: t0)
        #expect(
            c.receive(h("01 10 0100 0e"), now: t0)
                == [
                    .completed(
                        GATTRequestID(rawValue: 1), .failure(GATTClientError(.attError, "", attError: .unlikelyError)))
                ])
    }
}

extension GATTServerAction {
    /// The same bytes as a client action, for scripted client tests.
    var asClient: GATTClientAction {
        guard case let .send(bytes) = self else { fatalError("not a send") }
        return .send(bytes)
    }
}
