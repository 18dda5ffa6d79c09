// SPDX-License-Identifier: GPL-2.0-or-later

import Testing
import Transport

@Suite("BluetoothAddress")
struct BluetoothAddressTests {
    @Test func parsesAndPrints() throws {
        let a = try #require(BluetoothAddress("00:aa:01:00:00:2f"))
        #expect(a.description == "00:AA:01:00:00:2F")
        #expect(a.rawValue == 0x00AA_0100_002F)
        #expect(a.octets == [0x00, 0xAA, 0x01, 0x00, 0x00, 0x2F])
        #expect(a.littleEndianOctets == [0x2F, 0x00, 0x00, 0x01, 0xAA, 0x00])
        #expect(BluetoothAddress(littleEndianOctets: a.littleEndianOctets) == a)
        #expect(a.type == .public)
    }

    @Test(arguments: [
        "", "00:AA:01:00:00", "00:AA:01:00:00:2F:11", "0:AA:01:00:00:2F", "00:AA:01:00:00:2G", "00-AA-01-00-00-2F",
        "00:AA:01:00:00:+F",
    ])
    func rejects(_ text: String) {
        #expect(BluetoothAddress(text) == nil)
    }
}

@Suite("TransportAddress")
struct TransportAddressTests {
    @Test func parsesUnixPaths() throws {
        #expect(try TransportAddress(parsing: "unix:/tmp/cuff.sock") == .unix(path: "/tmp/cuff.sock"))
        #expect(try TransportAddress(parsing: "unix:rel.sock") == .unix(path: "rel.sock"))
        #expect(TransportAddress.unix(path: "/tmp/x").description == "unix:/tmp/x")
    }

    @Test func parsesBluetoothAddressesWithType() throws {
        let plain = try TransportAddress(parsing: "C0:FF:EE:00:00:01")
        #expect(plain == .bluetooth(BluetoothAddress(rawValue: 0xC0FF_EE00_0001, type: .public)))
        let random = try TransportAddress(parsing: "c0:ff:ee:00:00:01/random")
        #expect(random == .bluetooth(BluetoothAddress(rawValue: 0xC0FF_EE00_0001, type: .random)))
        #expect(random.description == "C0:FF:EE:00:00:01/random")
        #expect(try TransportAddress(parsing: random.description) == random)
        #expect(try TransportAddress(parsing: "C0:FF:EE:00:00:01/public") == plain)
    }

    @Test(arguments: [
        "unix:", "tcp:1.2.3.4", "C0:FF:EE:00:00:01/static", "hello", "unix:/" + String(repeating: "p", count: 120),
    ])
    func rejects(_ text: String) {
        let error = #expect(throws: TransportAddressError.self) { _ = try TransportAddress(parsing: text) }
        #expect(error?.description.hasPrefix("invalid address \"\(text)\": ") == true)
    }
}

@Suite("MonotonicClock")
struct MonotonicClockTests {
    @Test func neverGoesBackwards() {
        var last = MonotonicClock.now()
        #expect(last.nanoseconds > 0)
        for _ in 0..<1000 {
            let now = MonotonicClock.now()
            #expect(now >= last)
            last = now
        }
    }
}
