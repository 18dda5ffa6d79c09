import CuffCore
import Testing
@testable import Omron

@Suite("Omron advertisements")
struct AdvertisementTests {
    @Test func manufacturerDataAndNames() throws {
        // Format 0x01, status: 1 user, time not set, pairing mode, data pending; 4 + 3 bytes.
        let msd: [UInt8] = [0x0E, 0x02, 0x01, 0b0100_1101, 0, 0, 1, 2, 3]
        let seen = OmronAdvertisement.recognise(name: "BLESmart_000000BCF95D33C7649F", structures: [(0xFF, msd)])
        let a = try #require(seen)
        #expect(
            a.format == 1 && a.registeredUsers == 1 && a.timeNotSet == true && a.pairingMode == true
                && a.dataPending == true)
        #expect(!a.malformedManufacturerData && a.profile == nil)
        // Format 0x09 of 10 bytes breaks its length rule.
        let short: [UInt8] = [0x0E, 0x02, 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        let broken = OmronAdvertisement.recognise(name: nil, structures: [(0xFF, short)])
        let bad = try #require(broken)
        #expect(bad.malformedManufacturerData && bad.pairingMode == nil)
        // FE4A in the 16-bit list; the classic 128-bit UUID (little-endian) in the 128-bit list.
        #expect(
            OmronAdvertisement.recognise(name: nil, structures: [(0x03, [0x10, 0x18, 0x4A, 0xFE])])?.transport
                == .modern)
        let classic = Array(Hex.decode(OmronUUID.classicService.filter { $0 != "-" })!.reversed())
        #expect(OmronAdvertisement.recognise(name: nil, structures: [(0x07, classic)])?.transport == .classic)
        #expect(OmronAdvertisement.recognise(name: "HEM-7600T", structures: [])?.profile?.id == "HEM-7600T")
        // Another vendor's cuff is not Omron's.
        let other: [(type: UInt8, data: [UInt8])] = [(0x03, [0x10, 0x18]), (0xFF, [0x11, 0x06, 1])]
        #expect(OmronAdvertisement.recognise(name: "BM85", structures: other) == nil)
    }
}
