// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import DBus
import GATT

/// An attribute database as a BlueZ GATT application (`org.bluez.GattService1`,
/// `GattCharacteristic1`, `GattDescriptor1` objects under one root) and an `LEAdvertisement1`:
/// object paths, their properties, and which handle each object stands for. Pure.
///
/// The Generic Access and Generic Attribute services are bluetoothd's own (it refuses them in an
/// application) and CCCDs are bluetoothd's too (it adds one for every characteristic that
/// notifies or indicates, and calls StartNotify/StopNotify): neither is exported.
public struct BlueZGATTLayout: Sendable {
    public enum Kind: Sendable, Hashable { case service, characteristic, descriptor }

    /// One exported object.
    public struct Object: Sendable, Hashable {
        public var path: String
        public var kind: Kind
        /// The value handle (characteristic), the descriptor's handle, or the service's declaration.
        public var handle: UInt16
        public var interface: String {
            switch kind {
            case .service: "org.bluez.GattService1"
            case .characteristic: "org.bluez.GattCharacteristic1"
            case .descriptor: "org.bluez.GattDescriptor1"
            }
        }
        public var properties: [(String, DBusValue)]
        public static func == (a: Object, b: Object) -> Bool {
            a.path == b.path && a.handle == b.handle && a.kind == b.kind
        }
        public func hash(into h: inout Hasher) { h.combine(path); h.combine(handle) }
    }

    public let root: String
    public let advertisementPath: String
    public private(set) var objects: [Object] = []
    /// Characteristic value handle → its CCCD handle and the CCCD value StartNotify writes.
    public private(set) var subscriptions: [UInt16: (cccd: UInt16, value: UInt16)] = [:]
    /// The advertisement's properties.
    public private(set) var advertisement: [(String, DBusValue)]
    private var byPath: [String: Int] = [:]
    private var byHandle: [UInt16: Int] = [:]

    public static let bloodPressureService = BluetoothUUID(0x1810)

    /// - Parameter manufacturerData: company identifier → data, advertised when not empty.
    /// - Parameter serviceUUIDs16: the advertised services (default the Blood Pressure Service).
    public init(
        database: AttributeDatabase, name: String, serviceUUIDs16: [UInt16] = [0x1810],
        manufacturerData: [UInt16: [UInt8]] = [:],
        root: String = "/cuff/app", advertisementPath: String = "/cuff/advertisement0"
    ) {
        self.root = root
        self.advertisementPath = advertisementPath
        advertisement = Self.advertisementProperties(
            name: name, serviceUUIDs16: serviceUUIDs16, manufacturerData: manufacturerData)
        let skipped: Set<BluetoothUUID> = [.genericAccess, BluetoothUUID(0x1801)]
        var serviceIndex = 0
        for service in database.services where !skipped.contains(service.uuid) {
            let servicePath = "\(root)/service\(serviceIndex)"
            serviceIndex += 1
            add(
                Object(
                    path: servicePath, kind: .service, handle: service.handle,
                    properties: [
                        ("UUID", .string(Self.text(service.uuid))), ("Primary", .boolean(service.isPrimary)),
                    ]))
            let characteristics = database.characteristics.filter {
                (service.handle...service.endHandle).contains($0.valueHandle)
            }
            for (ci, c) in characteristics.enumerated() {
                let charPath = "\(servicePath)/char\(ci)"
                let permissions = database.attribute(c.valueHandle)?.permissions ?? []
                add(
                    Object(
                        path: charPath, kind: .characteristic, handle: c.valueHandle,
                        properties: [
                            ("UUID", .string(Self.text(c.uuid))), ("Service", .objectPath(servicePath)),
                            (
                                "Flags",
                                .array(element: "s", Self.flags(c.properties, permissions).map(DBusValue.string))
                            ),
                        ]))
                if let cccd = c.cccdHandle {
                    let value: UInt16 =
                        (c.properties.contains(.notify) ? 1 : 0) | (c.properties.contains(.indicate) ? 2 : 0)
                    subscriptions[c.valueHandle] = (cccd, value)
                }
                // The descriptors: after the value, up to the next declaration or the service's end.
                let next =
                    characteristics.dropFirst(ci + 1).first?.declarationHandle
                    ?? (service.endHandle == .max ? .max : service.endHandle + 1)
                guard c.valueHandle < .max, next > c.valueHandle + 1 else { continue }
                var di = 0
                for a in database.attributes(in: c.valueHandle + 1, next - 1)
                where a.type != .clientCharacteristicConfiguration && a.type != .characteristicExtendedProperties {
                    var flags: [String] = []
                    if a.permissions.contains(.read) || a.permissions.contains(.readEncrypted) {
                        flags.append(a.permissions.contains(.readEncrypted) ? "encrypt-read" : "read")
                    }
                    if a.permissions.contains(.write) || a.permissions.contains(.writeEncrypted) {
                        flags.append(a.permissions.contains(.writeEncrypted) ? "encrypt-write" : "write")
                    }
                    add(
                        Object(
                            path: "\(charPath)/desc\(di)", kind: .descriptor, handle: a.handle,
                            properties: [
                                ("UUID", .string(Self.text(a.type))), ("Characteristic", .objectPath(charPath)),
                                ("Flags", .array(element: "s", flags.map(DBusValue.string))),
                            ]))
                    di += 1
                }
            }
        }
    }

    private mutating func add(_ o: Object) {
        byPath[o.path] = objects.count
        if o.kind != .service { byHandle[o.handle] = objects.count }
        objects.append(o)
    }

    /// The object at `path`.
    public func object(at path: String) -> Object? { byPath[path].map { objects[$0] } }

    /// The characteristic or descriptor for `handle`.
    public func object(handle: UInt16) -> Object? { byHandle[handle].map { objects[$0] } }

    /// BlueZ's characteristic flags: the declared properties, and `encrypt-…`/`encrypt-authenticated-…`
    /// where the value's permissions need a secure link (bluetoothd then enforces it).
    public static func flags(_ p: CharacteristicProperties, _ permissions: AttributePermissions) -> [String] {
        var out: [String] = []
        if p.contains(.broadcast) { out.append("broadcast") }
        if p.contains(.read) {
            out.append(
                permissions.contains(.readAuthenticated)
                    ? "encrypt-authenticated-read" : permissions.contains(.readEncrypted) ? "encrypt-read" : "read")
        }
        if p.contains(.writeWithoutResponse) { out.append("write-without-response") }
        if p.contains(.write) {
            out.append(
                permissions.contains(.writeAuthenticated)
                    ? "encrypt-authenticated-write" : permissions.contains(.writeEncrypted) ? "encrypt-write" : "write")
        }
        if p.contains(.notify) { out.append("notify") }
        if p.contains(.indicate) { out.append("indicate") }
        if p.contains(.authenticatedSignedWrites) { out.append("authenticated-signed-writes") }
        return out
    }

    /// The 128-bit lowercase form BlueZ uses.
    public static func text(_ uuid: BluetoothUUID) -> String {
        let digits = Array("0123456789abcdef")
        var out = ""
        for (i, nibble) in (0..<32).map({ i -> Int in
            let word = i < 16 ? uuid.high : uuid.low
            return Int((word >> UInt64(60 - 4 * (i % 16))) & 0xF)
        }).enumerated() {
            if [8, 12, 16, 20].contains(i) { out.append("-") }
            out.append(digits[nibble])
        }
        return out
    }

    /// `GetManagedObjects` on the root: `a{oa{sa{sv}}}`.
    public var managedObjects: DBusValue {
        .array(
            element: "{oa{sa{sv}}}",
            objects.map { o in
                .dictEntry(
                    .objectPath(o.path),
                    .array(element: "{sa{sv}}", [.dictEntry(.string(o.interface), .dictionary(o.properties))]))
            })
    }

    /// The `LEAdvertisement1` properties of an advertisement.
    static func advertisementProperties(
        name: String, serviceUUIDs16: [UInt16], manufacturerData: [UInt16: [UInt8]]
    ) -> [(String, DBusValue)] {
        var properties: [(String, DBusValue)] = [
            ("Type", .string("peripheral")),
            ("ServiceUUIDs", .array(element: "s", serviceUUIDs16.map { .string(Self.text(BluetoothUUID($0))) })),
            ("LocalName", .string(name)),
            // General Discoverable in the Flags, as a cuff advertises (0x06; the raw path's too).
            // Without it bluetoothd advertises no discoverable flag unless the whole adapter is
            // discoverable, and a desktop's discovery (bluetoothctl, GNOME) drops the cuff.
            ("Discoverable", .boolean(true)),
        ]
        if !manufacturerData.isEmpty {
            properties.append(
                (
                    "ManufacturerData",
                    .array(
                        element: "{qv}",
                        manufacturerData.sorted { $0.key < $1.key }.map {
                            .dictEntry(.uint16($0.key), .variant(.bytes($0.value)))
                        })
                ))
        }
        return properties
    }

    /// Changes the advertisement; returns the properties whose values changed (for
    /// PropertiesChanged) and the names of those now gone.
    public mutating func changeAdvertisement(
        name: String, serviceUUIDs16: [UInt16], manufacturerData: [UInt16: [UInt8]]
    ) -> (changed: [(String, DBusValue)], removed: [String]) {
        let new = Self.advertisementProperties(
            name: name, serviceUUIDs16: serviceUUIDs16, manufacturerData: manufacturerData)
        let old = advertisement
        advertisement = new
        let changed = new.filter { n in !old.contains { $0.0 == n.0 && $0.1 == n.1 } }
        let removed = old.map(\.0).filter { k in !new.contains { $0.0 == k } }
        return (changed, removed)
    }

    /// The properties of `interface` at `path` (an exported object or the advertisement).
    public func properties(path: String, interface: String) -> [(String, DBusValue)]? {
        if path == advertisementPath, interface == "org.bluez.LEAdvertisement1" { return advertisement }
        guard let o = object(at: path), o.interface == interface else { return nil }
        return o.properties
    }
}
