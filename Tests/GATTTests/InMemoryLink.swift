// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
@testable import GATT

/// A client and a server that talk purely in memory: every `.send` of one is fed to the other,
/// in order, until both are quiet. Everything else is collected for the test to inspect.
struct InMemoryLink {
    var client = GATTClient()
    var server = GATTServer(database: testDatabase())
    var now = t0
    /// Every PDU the client sent, in order.
    var clientSent: [[UInt8]] = []
    var clientEvents: [GATTClientAction] = []
    var serverEvents: [GATTServerAction] = []

    private enum Delivery { case toServer([UInt8]), toClient([UInt8]) }
    private var pending: [Delivery] = []

    mutating func client(_ actions: [GATTClientAction]) {
        for a in actions {
            if case let .send(pdu) = a {
                clientSent.append(pdu); pending.append(.toServer(pdu))
            } else {
                clientEvents.append(a)
            }
        }
        pump()
    }

    mutating func server(_ actions: [GATTServerAction]) {
        for a in actions {
            if case let .send(pdu) = a { pending.append(.toClient(pdu)) } else { serverEvents.append(a) }
        }
        pump()
    }

    private mutating func pump() {
        var budget = 10_000  // a bug must fail the test, not hang it
        while !pending.isEmpty, budget > 0 {
            budget -= 1
            switch pending.removeFirst() {
            case let .toServer(pdu):
                let actions = server.receive(pdu, now: now)
                for a in actions {
                    if case let .send(out) = a { pending.append(.toClient(out)) } else { serverEvents.append(a) }
                }
            case let .toClient(pdu):
                let actions = client.receive(pdu, now: now)
                for a in actions {
                    if case let .send(out) = a {
                        clientSent.append(out); pending.append(.toServer(out))
                    } else {
                        clientEvents.append(a)
                    }
                }
            }
        }
    }

    /// The result the client reported for `id`.
    func result(_ id: GATTRequestID) -> Result<GATTClientResponse, GATTClientError>? {
        for case let .completed(done, result) in clientEvents where done == id { return result }
        return nil
    }
}
