// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Testing
@testable import GATT

/// A fixed-seed xorshift generator, so the "random" bytes are the same on every run.
struct XorShift: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}

/// PDUs biased towards real opcodes, 0–30 bytes long.
func randomPDUs(count: Int, seed: UInt64) -> [[UInt8]] {
    var rng = XorShift(state: seed)
    let opcodes: [UInt8] = [
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x10, 0x11,
        0x12, 0x13, 0x1B, 0x1D, 0x1E, 0x52, 0x3F, 0x7F,
    ]
    return (0..<count).map { _ in
        let length = Int.random(in: 0...30, using: &rng)
        var pdu = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
        if !pdu.isEmpty, Bool.random(using: &rng) { pdu[0] = opcodes.randomElement(using: &rng)! }
        return pdu
    }
}

@Suite struct RobustnessTests {
    @Test func parserRoundTripsWhatItAccepts() {
        for pdu in randomPDUs(count: 5_000, seed: 0x5EED) {
            guard let parsed = try? ATTPDU(parsing: pdu) else { continue }
            // Find Information with a base-UUID in format 2 re-encodes in format 1; every other
            // accepted PDU encodes back to its bytes.
            if case .findInformationResponse = parsed, pdu[1] == 2 { continue }
            if parsed.bytes != pdu { Issue.record("\(Hex.encode(pdu)) re-encodes as \(Hex.encode(parsed.bytes))") }
        }
    }

    @Test func serverAnswersEveryRequestWithinTheMTU() {
        var server = GATTServer(database: testDatabase())
        for pdu in randomPDUs(count: 5_000, seed: 0xC0FFEE) {
            let actions = server.receive(pdu, now: t0)
            let sends = actions.compactMap { if case let .send(b) = $0 { b } else { nil } }
            if !sends.allSatisfy({ $0.count <= Int(server.mtu) }) {
                Issue.record("oversize answer to \(Hex.encode(pdu))")
            }
            // Every request gets exactly one answer (no deferred writes here).
            if let op = pdu.first, ATTOpcode(op).isRequest, sends.count != 1 {
                Issue.record("\(sends.count) answers to \(Hex.encode(pdu))")
            }
        }
    }

    @Test func clientNeverTrapsOrLoops() {
        for seed in UInt64(1)...50 {
            var client = GATTClient()
            var now = t0
            _ = client.discover(now: now)
            for pdu in randomPDUs(count: 200, seed: seed) {
                now = now + .milliseconds(10)
                let actions = client.receive(pdu, now: now)
                #expect(actions.count < 100)
                if client.failure != nil { break }
            }
        }
    }

    @Test func discoveryCursorPastTheLastHandle() {
        var c = GATTClient()
        _ = c.discover(now: t0)
        #expect(c.receive(h("11 06 0100 ffff 1018"), now: t0) == [csend("08 0200 ffff 0328")])
        // The first declaration's value sits at 0xFFFF; an entry after it goes backwards.
        let actions = c.receive(h("09 07 0200 20 ffff 352a 0300 20 0400 362a"), now: t0)
        #expect(actions == [.completed(id1, .failure(GATTClientError(.invalidResponse, "")))])
        guard case let .completed(_, .failure(e)) = actions.first else { return }
        #expect(e.message == "characteristic declaration at 0x0003 is outside 0x10000-0xFFFF")
    }

    @Test func uuidStringWithExtraDashes() {
        #expect(BluetoothUUID(String(repeating: "-", count: 32) + "2a35") == nil)
    }
}
