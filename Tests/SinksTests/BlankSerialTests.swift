// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import CuffSession
import CuffTestSupport
import Testing

@testable import Sinks

/// A cuff whose Serial Number is empty, blanks or NULs (cheap cuffs send such a value) has no
/// serial: it is known by its address, so two such cuffs stay two devices.
@Suite struct BlankSerialTests {
    @Test func aBlankSerialIsNoSerial() {
        for blank in ["", "\0\0\0\0", "   ", "\t\r\n", " \0 "] {
            let d = DeviceInfo(address: "AA:BB:CC:00:00:01", serial: blank)
            #expect(d.serial == nil && d.identity == "address:AA:BB:CC:00:00:01", "\(blank.debugDescription)")
            var e = DeviceInfo(address: "AA:BB:CC:00:00:02", serial: "SN1")
            e.serial = blank
            #expect(e.serial == nil && e.identity == "address:AA:BB:CC:00:00:02", "\(blank.debugDescription)")
        }
        // A serial with characters is kept as sent; one that many cuffs send alike (a lone "0", a
        // run of one character) is no identity: such cuffs are known by their address too.
        #expect(DeviceInfo(address: "a", serial: " 0 ").serial == " 0 ")
        #expect(DeviceInfo(address: "a", serial: " 0 ").identity == "address:a")
        #expect(DeviceInfo(address: "a", serial: " A7 ").identity == "serial: A7 ", "a serial with characters is one")
    }

    @Test func twoCuffsWithBlankSerialsStayTwoInTheStore() throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        let store = try SQLiteStore(path: dir.path("s.db"))
        // The same reading at the same time from two cuffs whose serials are NULs.
        let a = DeviceInfo(address: "00:AA:01:00:00:00", model: "X", serial: "\0\0\0\0\0\0\0\0\0\0")
        let b = DeviceInfo(address: "00:AA:01:42:42:42", model: "X", serial: "\0\0\0\0\0\0\0\0\0\0")
        for d in [a, b] { try store.write(.measurement(try Vectors.bpm(Vectors.withDateTime, device: d))) }
        let rows = try store.history()
        #expect(rows.map(\.device.address).sorted() == ["00:AA:01:00:00:00", "00:AA:01:42:42:42"])
        #expect(rows.allSatisfy { $0.device.serial == nil })
        try store.finish()
    }
}
