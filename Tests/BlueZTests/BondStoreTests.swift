// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Glibc
import Testing
@testable import BlueZ
import Transport

@Suite("Raw-path bond store")
struct BondStoreTests {
    static let adapter = BluetoothAddress("00:AA:01:01:00:01")!
    /// New Long Term Key (0x000A) [hci1]: store hint 1; 00:AA:01:00:00:00 LE public, key type 2
    /// (unauthenticated P-256), central 0, enc size 16, ediv 0, rand 0, value 00 11 … ff.
    static let newLTK: [UInt8] = Hex.decode(
        "0a00 0100 2500 01 000000 01aa00 01 02 00 10 0000 0000000000000000 00112233445566778899aabbccddeeff")!

    @Test func keysFromMGMTEventsRoundTripThroughAFileOnlyTheUserReads() throws {
        let packet = try MGMTPacket(parsing: Self.newLTK)
        let key = try #require(BondKey.from(event: packet, adapterAddress: Self.adapter))
        #expect(key.kind == .ltk)
        #expect(key.peer == MGMTAddress(BluetoothAddress("00:AA:01:00:00:00")!, typeCode: 1))
        var template = Array("/tmp/cuff-bonds-XXXXXX".utf8CString)
        let dir = String(cString: try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }))
        defer { system("rm -rf '\(dir)'") }
        let path = dir + "/state/cuff/bonds"
        var store = try BondStore(path: path)
        #expect(store.keys.isEmpty)
        store.add([key, key])
        #expect(store.keys.count == 1)  // the same key once
        try store.save()
        var st = stat()
        #expect(stat(path, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o600)
        #expect(stat(dir + "/state/cuff", &st) == 0 && st.st_mode & 0o777 == 0o700)
        var again = try BondStore(path: path)
        #expect(again.keys == [key])
        // Load Long Term Keys carries the record unchanged after a count.
        let load = MGMTCommand.loadLongTermKeys(index: 1, again.keys(adapterAddress: Self.adapter, kind: .ltk))
        #expect(load.encoded == Hex.decode("1300 0100 2600 0100")! + key.record)
        #expect(again.remove(peer: BluetoothAddress("00:AA:01:00:00:00")!, adapterAddress: Self.adapter) == 1)
        #expect(again.keys.isEmpty)
    }

    @Test func aFIFOInPlaceOfTheStoreIsRefusedAtOnce() throws {
        var template = Array("/tmp/cuff-bonds-XXXXXX".utf8CString)
        let dir = String(cString: try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }))
        defer { system("rm -rf '\(dir)'") }
        let path = dir + "/bonds"
        #expect(mkfifo(path, 0o600) == 0)
        // (A blocking open would wait here for a writer that never comes.)
        do {
            _ = try BondStore(path: path)
            Issue.record("a FIFO read as a bond store")
        } catch {
            #expect(error.message.contains("bond store \(path)") && error.message.contains("not a regular file"))
        }
    }

    @Test func damagedLinesAndWrongLengthsAreSkipped() throws {
        #expect(BondKey(line: "ltk 00:AA:01:01:00:01 0011") == nil)
        #expect(BondKey(line: "xyz 00:AA:01:01:00:01 00") == nil)
        #expect(
            BondKey.from(
                event: MGMTPacket(code: 0x000A, index: 0, parameters: [1, 2, 3]), adapterAddress: Self.adapter) == nil)
        #expect(
            MGMTCommand.unpairDevice(index: 1, MGMTAddress(BluetoothAddress("00:AA:01:00:00:00")!, typeCode: 1)).encoded
                == Hex.decode("1b00 0100 0800 000000 01aa00 01 01"))
    }
}
