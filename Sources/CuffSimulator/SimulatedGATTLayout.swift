// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import GATT

/// What a simulated cuff's database shows a GATT cache, from ``SimulatorConfiguration``: the
/// Generic Attribute service first (Service Changed, the Database Hash), a gap of unused handles
/// before the cuff's own services (a firmware whose handles moved), and a Service Changed
/// indication on each connection. Shared by every simulated cuff (``CuffPeripheral``,
/// ``OmronPeripheral``).
struct SimulatedGATTLayout: Sendable {
    let serviceChanged: AttributeDatabase.CharacteristicHandles?
    let hashHandle: UInt16?
    let indicatesServiceChanged: Bool

    /// Adds the Generic Attribute service `configuration` asks for, then the handle gap, to `b`.
    init(_ configuration: SimulatorConfiguration, _ b: inout AttributeDatabase.Builder) {
        var serviceChanged: AttributeDatabase.CharacteristicHandles?
        var hashHandle: UInt16?
        if configuration.serviceChanged || configuration.databaseHash {
            b.addService(.genericAttribute)
            if configuration.serviceChanged {
                serviceChanged = b.addCharacteristic(
                    .serviceChanged, properties: .indicate, permissions: [], value: [0, 0, 0, 0])
            }
            if configuration.databaseHash {
                hashHandle =
                    b.addCharacteristic(
                        .databaseHash, properties: .read, permissions: .read, value: [UInt8](repeating: 0, count: 16)
                    ).valueHandle
            }
        }
        if configuration.handleGap > 0 { b.skip(to: b.upcomingHandle + configuration.handleGap) }
        self.serviceChanged = serviceChanged
        self.hashHandle = hashHandle
        indicatesServiceChanged = configuration.indicatesServiceChanged
    }

    /// The built `database`, with its Database Hash filled in.
    func finish(_ database: AttributeDatabase) -> AttributeDatabase {
        var database = database
        if let hashHandle { database.setValue(Self.databaseHash(database), at: hashHandle) }
        return database
    }

    /// Service Changed's value and CCCD handles, when the cuff indicates it on connecting.
    var serviceChangedOnConnect: (value: UInt16, cccd: UInt16)? {
        indicatesServiceChanged ? serviceChanged.flatMap { sc in sc.cccdHandle.map { (sc.valueHandle, $0) } } : nil
    }

    /// On a connection (`server` just reset): the Service Changed indication (0x0001–0xFFFF) of a
    /// bonded cuff whose database changed, its subscription taken as kept.
    static func connected(
        _ sc: (value: UInt16, cccd: UInt16)?, _ server: inout GATTServer, now: Timestamp,
        into out: inout [GATTServerAction]
    ) {
        guard let sc else { return }
        server.restoreSubscription(cccdHandle: sc.cccd, notify: false, indicate: true)
        server.indicate(handle: sc.value, value: [0x01, 0x00, 0xFF, 0xFF], now: now, into: &out)
    }

    /// The Database Hash of `database`: over what Core Vol 3 Part G §7.3.1 names (each service,
    /// include and characteristic declaration's handle, type and value; each descriptor's handle
    /// and type), a 128-bit digest (two 64-bit FNV-1a lanes) rather than the AES-CMAC the
    /// specification asks for: a client only compares it with the value it kept.
    static func databaseHash(_ database: AttributeDatabase) -> [UInt8] {
        var lanes: (UInt64, UInt64) = (0xcbf2_9ce4_8422_2325, 0x6c62_272e_07bb_0142)
        func mix(_ bytes: [UInt8]) {
            for b in bytes {
                lanes.0 = (lanes.0 ^ UInt64(b)) &* 0x0000_0100_0000_01b3
                lanes.1 = (lanes.1 ^ UInt64(b ^ 0x5A)) &* 0x0000_0100_0000_01b3
            }
        }
        let declarations: Set<BluetoothUUID> = [.primaryService, .secondaryService, .include, .characteristic]
        let descriptors: Set<BluetoothUUID> = [
            .characteristicExtendedProperties, .characteristicUserDescription,
            .clientCharacteristicConfiguration, BluetoothUUID(0x2903), BluetoothUUID(0x2904), BluetoothUUID(0x2905),
        ]
        for a in database.attributes where declarations.contains(a.type) || descriptors.contains(a.type) {
            mix([UInt8(a.handle & 0xFF), UInt8(a.handle >> 8)] + a.type.littleEndianBytes)
            if declarations.contains(a.type) { mix(a.value) }
        }
        return withUnsafeBytes(of: lanes.0.littleEndian) { Array($0) }
            + withUnsafeBytes(of: lanes.1.littleEndian) { Array($0) }
    }
}
