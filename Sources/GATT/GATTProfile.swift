// SPDX-License-Identifier: GPL-2.0-or-later

/// What a client discovered on a server: services, their characteristics and descriptors
/// (Core Vol 3 Part G §4.4–4.7).
public struct GATTProfile: Sendable, Hashable {
    public struct Service: Sendable, Hashable {
        public var uuid: BluetoothUUID
        public var handle: UInt16
        public var endHandle: UInt16
        public var characteristics: [Characteristic]

        public init(uuid: BluetoothUUID, handle: UInt16, endHandle: UInt16, characteristics: [Characteristic] = []) {
            self.uuid = uuid
            self.handle = handle
            self.endHandle = endHandle
            self.characteristics = characteristics
        }
    }

    public struct Characteristic: Sendable, Hashable {
        public var uuid: BluetoothUUID
        public var properties: CharacteristicProperties
        public var declarationHandle: UInt16
        public var valueHandle: UInt16
        /// The Client Characteristic Configuration descriptor, when the server has one.
        public var cccdHandle: UInt16?
        /// Every descriptor found between this characteristic's value and the next declaration.
        public var descriptors: [ATTPDU.HandleUUID]

        public init(
            uuid: BluetoothUUID, properties: CharacteristicProperties, declarationHandle: UInt16,
            valueHandle: UInt16, cccdHandle: UInt16? = nil, descriptors: [ATTPDU.HandleUUID] = []
        ) {
            self.uuid = uuid
            self.properties = properties
            self.declarationHandle = declarationHandle
            self.valueHandle = valueHandle
            self.cccdHandle = cccdHandle
            self.descriptors = descriptors
        }
    }

    public var services: [Service]

    public init(services: [Service] = []) { self.services = services }

    /// The first service with this UUID.
    public func service(_ uuid: BluetoothUUID) -> Service? { services.first { $0.uuid == uuid } }

    /// The first characteristic with this UUID, optionally only inside `service`.
    public func characteristic(_ uuid: BluetoothUUID, in service: BluetoothUUID? = nil) -> Characteristic? {
        for s in services where service == nil || s.uuid == service {
            if let c = s.characteristics.first(where: { $0.uuid == uuid }) { return c }
        }
        return nil
    }

    /// The characteristic whose value is at `valueHandle`.
    public func characteristic(valueHandle: UInt16) -> Characteristic? {
        services.lazy.flatMap(\.characteristics).first { $0.valueHandle == valueHandle }
    }
}
