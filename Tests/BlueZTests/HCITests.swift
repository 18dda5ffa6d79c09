// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffSimulator
import Omron
import Testing
@testable import BlueZ
import Transport

@Suite("HCI commands and events")
struct HCITests {
    @Test func commandPackets() {
        // < HCI Command: LE Set Scan Parameters (0x08|0x000b) plen 7: active, 10 ms / 10 ms, public, accept all
        #expect(
            HCICommand.leSetScanParameters(active: true, interval: 0x0010, window: 0x0010).packet
                == [0x01, 0x0B, 0x20, 0x07, 0x01, 0x10, 0x00, 0x10, 0x00, 0x00, 0x00])
        // < LE Set Scan Enable: enabled, duplicates not filtered
        #expect(HCICommand.leSetScanEnable(true).packet == [0x01, 0x0C, 0x20, 0x02, 0x01, 0x00])
        // < LE Set Advertising Parameters: 100–150 ms, ADV_IND, public, all channels, no filter
        #expect(
            HCICommand.leSetAdvertisingParameters(intervalMin: 0x00A0, intervalMax: 0x00F0).packet
                == [0x01, 0x06, 0x20, 0x0F, 0xA0, 0x00, 0xF0, 0x00, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0x07, 0x00])
        // < LE Set Advertising Enable: on
        #expect(HCICommand.leSetAdvertisingEnable(true).packet == [0x01, 0x0A, 0x20, 0x01, 0x01])
        let data = HCICommand.leSetAdvertisingData([0x02, 0x01, 0x06])
        #expect(data.opcode == 0x2008)
        #expect(data.parameters.count == 32)
        #expect(Array(data.parameters.prefix(4)) == [0x03, 0x02, 0x01, 0x06])
        #expect(HCICommand.leSetScanResponseData([]).parameters == Array(repeating: 0, count: 32))
    }

    @Test func commandCompleteAndStatus() throws {
        // > HCI Event: Command Complete (0x0e) plen 4: LE Set Scan Enable (0x08|0x000c) ncmd 1, Status: Success
        #expect(
            try HCIEvent(packet: [0x04, 0x0E, 0x04, 0x01, 0x0C, 0x20, 0x00])
                == .commandComplete(opcode: 0x200C, returnParameters: [0x00]))
        // > HCI Event: Command Status (0x0f) plen 4: LE Create Connection (0x08|0x000d) ncmd 1, Status: Success
        #expect(
            try HCIEvent(packet: [0x04, 0x0F, 0x04, 0x00, 0x01, 0x0D, 0x20])
                == .commandStatus(status: 0x00, opcode: 0x200D))
        // > HCI Event: Disconnect Complete (0x05) plen 4: handle 42, reason remote user terminated (0x13)
        #expect(
            try HCIEvent(packet: [0x04, 0x05, 0x04, 0x00, 0x2A, 0x00, 0x13])
                == .disconnectionComplete(status: 0, handle: 42, reason: 0x13))
    }

    @Test(arguments: [
        [UInt8](), [0x04, 0x0E], [0x02, 0x0E, 0x00], [0x04, 0x0E, 0x05, 0x01, 0x0C, 0x20, 0x00],
        [0x04, 0x0E, 0x02, 0x01, 0x0C], [0x04, 0x3E, 0x00],
    ])
    func malformedEventsAreErrors(_ packet: [UInt8]) {
        #expect(throws: HCIParseError.self) { _ = try HCIEvent(packet: packet) }
    }

    @Test func refusalNamesTheStatusAndWhatToDo() {
        let e = HCISocket.refused(.leSetScanEnable(true), 0x0C, adapter: BluetoothAdapter(index: 1))
        #expect(
            e.message.hasPrefix(
                "hci1 refused HCI command 0x200c [0100]: command disallowed (0x0c) — the controller is busy"))
        #expect(e.hciStatus == HCIStatus.commandDisallowed && e.mgmtStatus == nil && e.code == .systemCall)
    }

    @Test func mgmtRefusalCarriesItsStatus() {
        let e = MGMTSocket.refused("Unpair Device", MGMTCommand.notPairedStatus, index: 0)
        #expect(e.mgmtStatus == 0x06 && e.hciStatus == nil)
        #expect(e.message == "Unpair Device: not paired (0x06)")
    }
}

@Suite("AdvertisingReport")
struct AdvertisingReportTests {
    /// From a btvirt capture (shared/vmble sample), hci1 scanning hci0 advertising via btmgmt:
    /// > HCI Event: LE Meta Event (0x3e) plen 18
    ///   LE Advertising Report (0x02): 1 report, ADV_IND, Public 00:AA:01:00:00:00,
    ///   data 6: Flags 0x04, TX power 0 dBm; RSSI invalid (0x7f)
    static let btvirtReport: [UInt8] = Hex.decode("04 3e 12 02 01 00 00 00 00 00 01 aa 00 06 02 01 04 02 0a 00 7f")!

    @Test func parsesARealLegacyReport() throws {
        guard case .leMeta(let sub, let params) = try HCIEvent(packet: Self.btvirtReport) else {
            Issue.record("not an LE Meta event")
            return
        }
        let reports = try AdvertisingReport.parse(subevent: sub, parameters: params)
        #expect(reports.count == 1)
        let r = try #require(reports.first)
        #expect(r.address.description == "00:AA:01:00:00:00")
        #expect(r.address.type == .public)
        #expect(r.kind == .advInd)
        #expect(r.connectable)
        #expect(r.rssi == nil)
        #expect(r.flags == 0x04)
        #expect(r.txPower == 0)
        #expect(r.localName == nil)
        #expect(
            r.json.serialized()
                == #"{"address":"00:AA:01:00:00:00","address_type":"public","kind":"adv_ind","connectable":true,"rssi":null,"name":null,"name_complete":false,"flags":4,"service_uuids":[],"manufacturer_data":[],"tx_power":0,"data":"020104020a00"}"#
        )
    }

    /// A Yonker cuff's 128-bit service UUID (cdeacd80-5235-4c07-8846-93a37ee6b86d), sent
    /// little-endian in an incomplete list (0x06), and the SBM69's name advert `06 09 53 42 4D 36 39`.
    @Test func parses128BitServiceUUIDs() {
        let uuid: [UInt8] = [
            0x6D, 0xB8, 0xE6, 0x7E, 0xA3, 0x93, 0x46, 0x88, 0x07, 0x4C, 0x35, 0x52, 0x80, 0xCD, 0xEA, 0xCD,
        ]
        let r = AdvertisingReport(
            address: BluetoothAddress(rawValue: 0x1122_3344_5566, type: .public), kind: .advInd, connectable: true,
            rssi: -60,
            data: [0x02, 0x01, 0x06, 0x11, 0x06] + uuid + [0x06, 0x09, 0x53, 0x42, 0x4D, 0x36, 0x39])
        #expect(r.serviceUUIDs128 == ["CDEACD80-5235-4C07-8846-93A37EE6B86D"])
        #expect(r.localName == "SBM69")
        #expect(!r.malformed)
        // A list cut short holds no UUID.
        let short = AdvertisingReport(
            address: BluetoothAddress(rawValue: 0x1122_3344_5566, type: .public), kind: .advInd, connectable: true,
            rssi: nil,
            data: [0x0B, 0x07] + Array(uuid.prefix(10)))
        #expect(short.serviceUUIDs128.isEmpty)
    }

    /// What our own advertiser sends, as a scanner receives it: flags 0x06, UUID 0x1810, name.
    @Test func parsesACuffAdvertisementWithNameUUIDsAndManufacturerData() throws {
        let ad = AdvertisingData.make(name: "cuff-sim") + [0x05, 0xFF, 0x4C, 0x00, 0x01, 0x02]
        // num 1, ADV_IND, random, C0:FF:EE:00:00:01, len, data, RSSI -60
        let params: [UInt8] = [0x01, 0x00, 0x01, 0x01, 0x00, 0x00, 0xEE, 0xFF, 0xC0, UInt8(ad.count)] + ad + [0xC4]
        let r = try #require(try AdvertisingReport.parse(subevent: 0x02, parameters: params).first)
        #expect(r.address == BluetoothAddress(rawValue: 0xC0FF_EE00_0001, type: .random))
        #expect(r.rssi == -60)
        #expect(r.flags == 0x06)
        #expect(r.serviceUUIDs16 == [0x1810])
        #expect(r.isBloodPressureCuff)
        #expect(r.localName == "cuff-sim")
        #expect(r.isNameComplete)
        #expect(r.manufacturerData.count == 1)
        #expect(r.manufacturerData.first?.companyID == 0x004C)
        #expect(r.manufacturerData.first?.data == [0x01, 0x02])
        #expect(r.json["service_uuids"] == .array([.string("1810")]))
        #expect(r.json["address_type"] == .string("random"))
    }

    @Test func parsesAnExtendedReportAndMergesScanResponse() throws {
        // LE Extended Advertising Report: legacy ADV_IND (0x0013), public 00:AA:01:00:00:00,
        // PHY 1/0, SID 0xFF, TX 127, RSSI -70, no periodic, no direct address, data flags 0x06.
        var params: [UInt8] = [
            0x01, 0x13, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xAA, 0x00, 0x01, 0x00, 0xFF, 0x7F, 0xBA,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ]
        params += [0x03, 0x02, 0x01, 0x06]
        let adv = try #require(try AdvertisingReport.parse(subevent: 0x0D, parameters: params).first)
        #expect(adv.kind == .advInd)
        #expect(adv.connectable)
        #expect(adv.rssi == -70)
        // Scan response (legacy SCAN_RSP to ADV_IND = 0x001B) carrying the name.
        let name = AdvertisingData.scanResponse(name: "Cuff")
        var rsp: [UInt8] = [
            0x01, 0x1B, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xAA, 0x00, 0x01, 0x00, 0xFF, 0x7F, 0xBB,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ]
        rsp += [UInt8(name.count)] + name
        let scan = try #require(try AdvertisingReport.parse(subevent: 0x0D, parameters: rsp).first)
        #expect(scan.kind == .scanResponse)
        let merged = adv.merged(with: scan)
        #expect(merged.kind == .advInd)
        #expect(merged.localName == "Cuff")
        #expect(merged.flags == 0x06)
        #expect(merged.rssi == -69)
    }

    @Test func truncatedReportsThrowAndBadADIsFlagged() throws {
        let full: [UInt8] = Array(Self.btvirtReport.dropFirst(4))  // subevent parameters
        for n in 0..<full.count {
            #expect(throws: HCIParseError.self) {
                _ = try AdvertisingReport.parse(subevent: 0x02, parameters: Array(full.prefix(n)))
            }
        }
        // An AD structure claiming 9 bytes in a 3-byte payload: kept what parsed, flagged.
        let (structures, malformed) = ADStructure.parse([0x02, 0x01, 0x06, 0x09, 0x09, 0x41])
        #expect(structures == [ADStructure(type: 0x01, data: [0x06])])
        #expect(malformed)
        // Zero length ends the data (padding).
        #expect(
            ADStructure.parse([0x02, 0x01, 0x06, 0x00, 0xFF, 0xFF]) == ([ADStructure(type: 0x01, data: [0x06])], false))
        #expect(try AdvertisingReport.parse(subevent: 0x03, parameters: [1, 2, 3]) == [])
    }

    /// Every Omron profile's simulated cuff advertises what a scanner (ours, or hass-omron's rules)
    /// recognises as Omron: its family's service where it fits, company 0x020E's data of a valid
    /// length, and a `BLESmart_` name complete in the scan response.
    @Test(arguments: OmronCatalog.profiles)
    func simulatedOmronAdvertisementIsRecognised(profile: OmronProfile) throws {
        var c = SimulatorConfiguration()
        c.omron = OmronSimulation(profile: profile)
        let ad = try #require(OmronPeripheral(configuration: c)).advertisement
        let name = try #require(ad.name)
        let data = AdvertisingData.make(
            name: name, serviceUUIDs16: ad.serviceUUIDs16, manufacturerData: ad.manufacturerData)
        #expect(data.count <= 31)
        let (structures, bad) = ADStructure.parse(data)
        #expect(!bad)
        let omron = try #require(
            OmronAdvertisement.recognise(name: nil, structures: structures.map { ($0.type, $0.data) }))
        #expect(!omron.malformedManufacturerData)
        #expect(omron.format == 0x01)
        #expect(omron.registeredUsers == min(3, profile.users.count))
        #expect(omron.dataPending == true, "the seeded cuff has unread readings")
        #expect(omron.pairingMode == false)
        #expect(omron.transport == (profile.transport == .modern ? .modern : nil))
        #expect(name.hasPrefix("BLESmart_") && name.count == 9 + 20 && name.dropFirst(9).allSatisfy(\.isHexDigit))
        let response = ADStructure.parse(AdvertisingData.scanResponse(name: name)).0
        #expect(response.first?.type == ADStructure.completeLocalName)
        #expect(OmronAdvertisement.recognise(name: name, structures: []) != nil)
    }

    @Test func advertisingDataFitsIn31BytesAndShortensLongNames() {
        #expect(
            AdvertisingData.make(name: "Cuff") == [
                0x02, 0x01, 0x06, 0x03, 0x03, 0x10, 0x18, 0x05, 0x09, 0x43, 0x75, 0x66, 0x66,
            ])
        let long = AdvertisingData.make(name: String(repeating: "é", count: 40))
        #expect(long.count <= 31)
        let (s, bad) = ADStructure.parse(long)
        #expect(!bad)
        #expect(s.last?.type == ADStructure.shortenedLocalName)
        #expect(String(validating: s.last!.data, as: UTF8.self) != nil, "cut on a character boundary")
        #expect(AdvertisingData.scanResponse(name: String(repeating: "n", count: 29)).count == 31)
        #expect(
            AdvertisingData.scanResponse(name: String(repeating: "n", count: 30))[1] == ADStructure.shortenedLocalName)
    }
}

@Suite("LinkWatcher: incoming LE links from HCI events")
struct LinkWatcherTests {
    @Test func peripheralConnectionsAndDisconnections() throws {
        // LE Connection Complete: status 0, handle 0x0040, role 1 (peripheral), peer public 00:AA:01:01:00:01, …
        let params: [UInt8] = [
            0x00, 0x40, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x01, 0xAA, 0x00, 0x28, 0x00, 0x00, 0x00, 0x2A, 0x00, 0x00,
        ]
        #expect(
            LinkWatcher.notice(.leMeta(subevent: 0x01, parameters: params))
                == .connected(.init(handle: 0x40, peer: BluetoothAddress("00:AA:01:01:00:01")!)))
        var central = params
        central[3] = 0x00  // we are the central: not an incoming link
        #expect(LinkWatcher.notice(.leMeta(subevent: 0x01, parameters: central)) == nil)
        var failed = params
        failed[0] = 0x3E
        #expect(LinkWatcher.notice(.leMeta(subevent: 0x01, parameters: failed)) == nil)
        #expect(LinkWatcher.notice(.leMeta(subevent: 0x01, parameters: Array(params.prefix(10)))) == nil)
        #expect(
            LinkWatcher.notice(.disconnectionComplete(status: 0, handle: 0x40, reason: 0x13))
                == .disconnected(handle: 0x40))
    }
}
