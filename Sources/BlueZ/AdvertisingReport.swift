// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Transport

/// One AD structure of advertising or scan-response data (Core Spec Vol 3 Part C §11):
/// length, AD type, data.
public struct ADStructure: Sendable, Hashable {
    public var type: UInt8
    public var data: [UInt8]
    public init(type: UInt8, data: [UInt8]) {
        self.type = type
        self.data = data
    }

    /// Parses advertising data leniently: a zero length ends it (the rest is padding); a structure
    /// that runs past the end is dropped and `malformed` is set.
    public static func parse(_ bytes: some Collection<UInt8>) -> (structures: [ADStructure], malformed: Bool) {
        var out: [ADStructure] = []
        var r = ByteReader(Array(bytes))
        while let length = r.readUInt8() {
            if length == 0 { break }
            guard let body = r.readBytes(Int(length)) else { return (out, true) }
            out.append(ADStructure(type: body.first!, data: Array(body.dropFirst())))
        }
        return (out, false)
    }

    /// Most data bytes one structure holds: its length byte counts the type byte too.
    public static let maxDataBytes = 254

    /// Encodes as length, type, data; data beyond ``maxDataBytes`` is left out (callers that
    /// build structures from longer values split or cut them first, and say so).
    public var encoded: [UInt8] {
        let kept = data.prefix(Self.maxDataBytes)
        return [UInt8(kept.count + 1), type] + kept
    }

    // AD types (Assigned Numbers §2.3).
    public static let flagsType: UInt8 = 0x01
    public static let incomplete16BitUUIDs: UInt8 = 0x02
    public static let complete16BitUUIDs: UInt8 = 0x03
    public static let shortenedLocalName: UInt8 = 0x08
    public static let completeLocalName: UInt8 = 0x09
    public static let txPowerLevel: UInt8 = 0x0A
    public static let manufacturerSpecific: UInt8 = 0xFF
}

/// One LE advertising report (legacy 0x02 or extended 0x0D subevent), decoded.
public struct AdvertisingReport: Sendable, Hashable, JSONRepresentable {
    /// The PDU kind the report came from.
    public enum Kind: String, Sendable, Hashable {
        case advInd = "adv_ind"  // connectable, scannable
        case advDirectInd = "adv_direct_ind"  // connectable, directed
        case advScanInd = "adv_scan_ind"  // scannable
        case advNonconnInd = "adv_nonconn_ind"
        case scanResponse = "scan_rsp"
        case extended = "extended"
    }

    public var address: BluetoothAddress
    public var kind: Kind
    /// For extended reports: connectable bit of the event type.
    public var connectable: Bool
    /// dBm; nil when the controller says "not available" (127).
    public var rssi: Int8?
    /// Raw AD bytes.
    public var data: [UInt8]
    public var structures: [ADStructure]
    /// Some AD structure ran past the end of the data.
    public var malformed: Bool
    /// Rebuilt from values longer than an AD structure holds (bluetoothd's cache): some were cut.
    public var truncated = false

    public init(address: BluetoothAddress, kind: Kind, connectable: Bool, rssi: Int8?, data: [UInt8]) {
        self.address = address
        self.kind = kind
        self.connectable = connectable
        self.rssi = rssi
        self.data = data
        (structures, malformed) = ADStructure.parse(data)
    }

    /// AD Flags (0x01), e.g. 0x06 = LE General Discoverable + BR/EDR not supported.
    public var flags: UInt8? { structures.first { $0.type == ADStructure.flagsType }?.data.first }

    /// Complete (0x09) or else shortened (0x08) local name, as UTF-8 (invalid bytes replaced).
    public var localName: String? {
        let s =
            structures.first { $0.type == ADStructure.completeLocalName }
            ?? structures.first { $0.type == ADStructure.shortenedLocalName }
        return s.map { String(decoding: $0.data, as: UTF8.self) }
    }

    /// Whether ``localName`` is the complete name.
    public var isNameComplete: Bool { structures.contains { $0.type == ADStructure.completeLocalName } }

    /// 16-bit service UUIDs from complete and incomplete lists (0x02, 0x03), in order.
    public var serviceUUIDs16: [UInt16] {
        structures.filter { $0.type == ADStructure.incomplete16BitUUIDs || $0.type == ADStructure.complete16BitUUIDs }
            .flatMap { s in
                stride(from: 0, to: s.data.count - 1, by: 2).map { UInt16(s.data[$0]) | UInt16(s.data[$0 + 1]) << 8 }
            }
    }

    /// 128-bit service UUIDs from complete and incomplete lists (0x06, 0x07), as uppercase
    /// text (`CDEACD80-5235-…`), in order.
    public var serviceUUIDs128: [String] {
        structures.filter { $0.type == 0x06 || $0.type == 0x07 }.flatMap { s in
            stride(from: 0, to: s.data.count - 15, by: 16).map { i in
                // little-endian on the air
                let b = s.data[s.data.startIndex + i..<s.data.startIndex + i + 16].reversed()
                let h = Hex.encode(Array(b)).uppercased()
                let c = Array(h)
                return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20])
                    + "-" + String(c[20..<32])
            }
        }
    }

    /// Manufacturer Specific Data (0xFF): company identifier and the bytes after it.
    public var manufacturerData: [(companyID: UInt16, data: [UInt8])] {
        structures.filter { $0.type == ADStructure.manufacturerSpecific && $0.data.count >= 2 }
            .map { (UInt16($0.data[0]) | UInt16($0.data[1]) << 8, Array($0.data[2...])) }
    }

    /// TX Power Level (0x0A) in dBm.
    public var txPower: Int8? {
        structures.first { $0.type == ADStructure.txPowerLevel }?.data.first.map { Int8(bitPattern: $0) }
    }

    /// Advertises the Blood Pressure service (0x1810)?
    public var isBloodPressureCuff: Bool { serviceUUIDs16.contains(0x1810) }

    /// `{"address","address_type","kind","connectable","rssi","name","name_complete","flags",
    /// "service_uuids":["1810"],"manufacturer_data":[{"company_id","data"}],"tx_power","data"}`;
    /// absent values are `null`, lists may be empty. UUIDs and data are lowercase hex.
    public var json: JSON {
        var pairs: [(String, JSON)] = [
            ("address", .string(address.description)),
            ("address_type", .string(address.type.description)),
            ("kind", .string(kind.rawValue)),
            ("connectable", .bool(connectable)),
            ("rssi", JSON.from(rssi) { .int(Int64($0)) }),
            ("name", JSON.from(localName) { .string($0) }),
            ("name_complete", .bool(isNameComplete)),
            ("flags", JSON.from(flags) { .int(Int64($0)) }),
            ("service_uuids", .array(serviceUUIDs16.map { .string(Hex.digits($0, 4, uppercase: false)) })),
            (
                "manufacturer_data",
                .array(
                    manufacturerData.map {
                        .object([
                            ("company_id", .string(Hex.digits($0.companyID, 4, uppercase: false))),
                            ("data", .string(Hex.encode($0.data))),
                        ])
                    })
            ),
            ("tx_power", JSON.from(txPower) { .int(Int64($0)) }),
            ("data", .string(Hex.encode(data))),
        ]
        if malformed { pairs.append(("malformed", .bool(true))) }
        if truncated { pairs.append(("truncated", .bool(true))) }
        return .object(pairs)
    }

    public static func == (a: AdvertisingReport, b: AdvertisingReport) -> Bool {
        a.address == b.address && a.kind == b.kind && a.connectable == b.connectable && a.rssi == b.rssi
            && a.data == b.data
    }

    public func hash(into h: inout Hasher) {
        h.combine(address)
        h.combine(kind)
        h.combine(data)
    }

    /// Parses the reports in an LE Meta event: subevent 0x02 (LE Advertising Report) or 0x0D
    /// (LE Extended Advertising Report). Other subevents give `[]`.
    ///
    /// - Throws: ``HCIParseError`` when a report runs past the end of the event.
    public static func parse(subevent: UInt8, parameters: [UInt8]) throws(HCIParseError) -> [AdvertisingReport] {
        var r = ByteReader(parameters)
        switch subevent {
        case 0x02:
            guard let count = r.readUInt8() else { throw HCIParseError("LE Advertising Report without a count") }
            var out: [AdvertisingReport] = []
            for i in 0..<Int(count) {
                guard let type = r.readUInt8(), let addrType = r.readUInt8(), let addr = r.readBytes(6),
                    let length = r.readUInt8(), let data = r.readBytes(Int(length)), let rssi = r.readUInt8()
                else { throw HCIParseError("LE Advertising Report \(i + 1) of \(count) is truncated") }
                let kind: Kind =
                    switch type {
                    case 0x00: .advInd
                    case 0x01: .advDirectInd
                    case 0x02: .advScanInd
                    case 0x03: .advNonconnInd
                    default: .scanResponse
                    }
                out.append(
                    AdvertisingReport(
                        address: address(addr, hciType: addrType), kind: kind,
                        connectable: type == 0x00 || type == 0x01, rssi: rssiValue(rssi), data: Array(data)))
            }
            return out
        case 0x0D:
            guard let count = r.readUInt8() else {
                throw HCIParseError("LE Extended Advertising Report without a count")
            }
            var out: [AdvertisingReport] = []
            for i in 0..<Int(count) {
                // Event_Type(2) Address_Type(1) Address(6) Primary_PHY(1) Secondary_PHY(1) SID(1)
                // TX_Power(1) RSSI(1) Periodic_Interval(2) Direct_Address_Type(1) Direct_Address(6)
                // Data_Length(1) Data
                guard let type = r.readUInt16(), let addrType = r.readUInt8(), let addr = r.readBytes(6),
                    r.skip(4), let rssi = r.readUInt8(), r.skip(9),
                    let length = r.readUInt8(), let data = r.readBytes(Int(length))
                else { throw HCIParseError("LE Extended Advertising Report \(i + 1) of \(count) is truncated") }
                let legacy = type & 0x10 != 0
                let kind: Kind
                if type & 0x08 != 0 {
                    kind = .scanResponse
                } else if legacy {
                    kind =
                        type & 0x01 != 0
                        ? (type & 0x04 != 0 ? .advDirectInd : .advInd)
                        : (type & 0x02 != 0 ? .advScanInd : .advNonconnInd)
                } else {
                    kind = .extended
                }
                out.append(
                    AdvertisingReport(
                        address: address(addr, hciType: addrType), kind: kind,
                        connectable: type & 0x01 != 0, rssi: rssiValue(rssi), data: Array(data)))
            }
            return out
        default:
            return []
        }
    }

    private static func address(_ bytes: ArraySlice<UInt8>, hciType: UInt8) -> BluetoothAddress {
        // HCI address types: 0 public, 1 random, 2/3 resolved-from-RPA (public/random identity).
        BluetoothAddress(littleEndianOctets: bytes, type: hciType & 0x01 == 0 ? .public : .random)
    }

    private static func rssiValue(_ raw: UInt8) -> Int8? {
        raw == 127 ? nil : Int8(bitPattern: raw)
    }

    /// Combines an advertisement with its scan response (same address): the union of their AD
    /// structures, the newer RSSI, and the advertisement's kind.
    public func merged(with other: AdvertisingReport) -> AdvertisingReport {
        let primary = kind == .scanResponse ? other : self
        let secondary = kind == .scanResponse ? self : other
        var m = AdvertisingReport(
            address: primary.address, kind: primary.kind, connectable: primary.connectable,
            rssi: other.rssi ?? rssi, data: primary.data)
        for s in secondary.structures where !m.structures.contains(where: { $0.type == s.type }) {
            m.structures.append(s)
        }
        m.malformed = primary.malformed || secondary.malformed
        return m
    }
}

/// Building the advertising payload a simulated cuff sends.
public enum AdvertisingData {
    /// Advertising data: Flags 0x06, complete list of 16-bit UUIDs, then the local name — complete
    /// if it fits in 31 bytes, else shortened (type 0x08) to fit.
    /// Manufacturer data (company identifier little-endian, then its bytes) goes before the name,
    /// each company's only while it fits.
    public static func make(
        name: String, serviceUUIDs16: [UInt16] = [0x1810], manufacturerData: [UInt16: [UInt8]] = [:],
        flags: UInt8 = 0x06
    ) -> [UInt8] {
        var out = ADStructure(type: ADStructure.flagsType, data: [flags]).encoded
        if !serviceUUIDs16.isEmpty {
            out +=
                ADStructure(
                    type: ADStructure.complete16BitUUIDs,
                    data: serviceUUIDs16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
                ).encoded
        }
        for (company, data) in manufacturerData.sorted(by: { $0.key < $1.key }) where out.count + 4 + data.count <= 31 {
            out +=
                ADStructure(
                    type: ADStructure.manufacturerSpecific, data: [UInt8(company & 0xFF), UInt8(company >> 8)] + data
                ).encoded
        }
        out += nameStructure(name, room: 31 - out.count)
        return out
    }

    /// Scan response data: the complete local name (shortened if longer than 29 bytes).
    public static func scanResponse(name: String) -> [UInt8] {
        nameStructure(name, room: 31)
    }

    /// A name structure fitting in `room` bytes (2 of which are header); empty if nothing fits.
    static func nameStructure(_ name: String, room: Int) -> [UInt8] {
        guard room > 2 else { return [] }
        let bytes = Array(name.utf8)
        if bytes.count <= room - 2 {
            return ADStructure(type: ADStructure.completeLocalName, data: bytes).encoded
        }
        // Cut on a UTF-8 character boundary.
        var cut = room - 2
        while cut > 0 && bytes[cut] & 0xC0 == 0x80 { cut -= 1 }
        return ADStructure(type: ADStructure.shortenedLocalName, data: Array(bytes[..<cut])).encoded
    }
}
