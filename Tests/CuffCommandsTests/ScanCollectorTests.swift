// SPDX-License-Identifier: GPL-2.0-or-later
import BlueZ
import BluetoothLive
import CuffCore
import CuffLogging
import Testing
import Transport

/// `cuff scan`'s merging in process: adverts and scan responses of real AD bytes, what is handed
/// out, when, and the record each becomes.
@Suite struct ScanCollectorTests {
    static let cuff = BluetoothAddress(rawValue: 0xA4C1_3812_3456, type: .public)
    static let other = BluetoothAddress(rawValue: 0x0011_2233_4455, type: .random)
    /// Flags, then the Blood Pressure Service in the complete 16-bit UUID list.
    static let bpsAdvert: [UInt8] = [0x02, 0x01, 0x06, 0x03, 0x03, 0x10, 0x18]
    /// A complete local name.
    static func name(_ s: String) -> [UInt8] { [UInt8(s.utf8.count + 1), 0x09] + Array(s.utf8) }

    func report(_ a: BluetoothAddress, _ kind: AdvertisingReport.Kind, _ data: [UInt8]) -> AdvertisingReport {
        AdvertisingReport(address: a, kind: kind, connectable: kind != .scanResponse, rssi: -60, data: data)
    }

    @Test func aCuffIsHandedOutOnceItsScanResponseNamesIt() throws {
        var out: [AdvertisingReport] = []
        let c = ScanCollector(all: false) { out.append($0) }
        try c.take(report(Self.cuff, .advInd, Self.bpsAdvert))
        #expect(out.isEmpty)  // no name yet: wait for the scan response
        try c.take(report(Self.cuff, .scanResponse, Self.name("BP cuff")))
        try c.take(report(Self.cuff, .advInd, Self.bpsAdvert))
        #expect(out.count == 1)
        #expect(out.first?.localName == "BP cuff")
        #expect(out.first?.isBloodPressureCuff == true)
        let lines = LogRecorder()
        try c.finish(log: lines.logger())
        #expect(out.count == 1)
        #expect(lines.lines == ["1 device(s) seen, 1 advertising the Blood Pressure service"])
    }

    @Test func otherDevicesOnlyWithAllAndUnnamedOnesAtTheEnd() throws {
        var cuffsOnly: [AdvertisingReport] = [], all: [AdvertisingReport] = []
        let a = ScanCollector(all: false) { cuffsOnly.append($0) }
        let b = ScanCollector(all: true) { all.append($0) }
        for c in [a, b] {
            try c.take(report(Self.other, .advNonconnInd, [0x02, 0x01, 0x06] + Self.name("kettle")))
            try c.take(report(Self.cuff, .advInd, Self.bpsAdvert))
        }
        #expect(cuffsOnly.isEmpty)
        #expect(all.map(\.address) == [Self.other])
        try a.finish(log: .silent)
        try b.finish(log: .silent)
        // The cuff never got a name: it comes out at the end, for both.
        #expect(cuffsOnly.map(\.address) == [Self.cuff])
        #expect(all.map(\.address) == [Self.other, Self.cuff])
    }

    @Test func bluetoothdsViewReplacesInsteadOfMerging() throws {
        var out: [AdvertisingReport] = []
        let c = ScanCollector(all: true) { out.append($0) }
        try c.take(report(Self.cuff, .advInd, Self.bpsAdvert), replacing: true)
        try c.take(report(Self.cuff, .advInd, Self.name("renamed")), replacing: true)
        #expect(out.count == 1)
        #expect(out[0].localName == "renamed")
        #expect(out[0].isBloodPressureCuff == false)  // replaced, not merged with the first report
    }

    @Test func theDeviceRecordSaysWhatCuffWouldUse() throws {
        let r = report(Self.cuff, .advInd, Self.bpsAdvert + Self.name("BP cuff"))
        let json = try #require(r.deviceRecord).serialized()
        #expect(json.hasPrefix(#"{"type":"device","address":"A4:C1:38:12:34:56""#))
        #expect(json.contains(#""blood_pressure":true"#))
        #expect(json.contains(#""protocol":"#))
        #expect(!json.contains(#""omron":"#))
    }
}
