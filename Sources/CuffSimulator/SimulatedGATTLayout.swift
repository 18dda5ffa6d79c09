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
        if let hashHandle { database.setValue(database.databaseHash, at: hashHandle) }
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
}
