// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Testing
@testable import GATT

/// AES-128, AES-CMAC and the Database Hash against published vectors.
@Suite struct DatabaseHashTests {
    /// FIPS-197 Appendix C.1.
    @Test func aes128EncryptsTheFIPS197Example() {
        let aes = AES128(key: Array(0..<16))
        #expect(aes.encrypt(h("00112233445566778899aabbccddeeff")) == h("69c4e0d86a7b0430d8cdb78070b4c55a"))
    }

    /// FIPS-197 §5.1.1: S-box entries the standard's table shows.
    @Test func theSBoxIsTheStandardOne() {
        #expect(AES128.sbox[0x00] == 0x63)
        #expect(AES128.sbox[0x01] == 0x7C)
        #expect(AES128.sbox[0x53] == 0xED)
        #expect(AES128.sbox[0xFF] == 0x16)
        #expect(Set(AES128.sbox).count == 256, "a permutation")
    }

    /// RFC 4493 §4, examples 1–4 (empty, one whole block, a partial last block, four blocks).
    @Test(arguments: [
        (0, "bb1d6929e95937287fa37d129b756746"), (16, "070a16b46b4d4144f79bdd9dd04a287c"),
        (40, "dfa66747de9ae63030ca32611497c827"), (64, "51f0bebf7e3b9d92fc49741779363cfe"),
    ])
    func aesCMACGivesTheRFC4493Tags(_ length: Int, _ tag: String) {
        let key = h("2b7e151628aed2a6abf7158809cf4f3c")
        let message = h(
            "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411"
                + "e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710")
        #expect(AESCMAC.tag(key: key, Array(message.prefix(length))) == h(tag))
    }

    /// The Database Hash of the tests' database (TestDatabase.swift), over the fields Core Vol 3
    /// Part G §7.3.1 names: the message (103 bytes) written out by hand from the handle layout,
    /// its AES-CMAC taken with Python's `cryptography` (CMAC over AES, key of zeros):
    /// 8fc698ac58a017bf383ea14362689983, sent little-endian.
    @Test func theDatabaseHashIsTheCMACOfTheDeclarations() {
        #expect(testDatabase().databaseHash == h("8399686243a13e38bf17a058ac98c68f"))
        // Values outside declarations (the device name) do not count; a handle moved does.
        var b = AttributeDatabase.Builder()
        b.addService(.genericAccess)
        b.addCharacteristic(.deviceName, properties: .read, permissions: .read, value: Array("other".utf8))
        let renamed = b.build().databaseHash
        var c = AttributeDatabase.Builder()
        c.addService(.genericAccess)
        c.addCharacteristic(.deviceName, properties: .read, permissions: .read, value: deviceNameValue)
        #expect(c.build().databaseHash == renamed)
        var d = AttributeDatabase.Builder()
        d.skip(to: 5)
        d.addService(.genericAccess)
        d.addCharacteristic(.deviceName, properties: .read, permissions: .read, value: deviceNameValue)
        #expect(d.build().databaseHash != renamed)
    }
}
