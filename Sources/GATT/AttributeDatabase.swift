// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// A GATT server's attributes, laid out as Core Vol 3 Part G §3 requires, handles from 0x0001 up.
///
/// Build one with ``Builder``:
/// ```swift
/// var b = AttributeDatabase.Builder()
/// b.addService(BluetoothUUID(0x1810))
/// let bpm = b.addCharacteristic(BluetoothUUID(0x2A35), properties: [.indicate], permissions: [])
/// let db = b.build()   // bpm.valueHandle == 0x0003, bpm.cccdHandle == 0x0004
/// ```
public struct AttributeDatabase: Sendable, Hashable {
    /// A service: its declaration handle, the last handle of its group, and its UUID (§3.1).
    public struct Service: Hashable, Sendable {
        public var uuid: BluetoothUUID
        public var isPrimary: Bool
        public var handle: UInt16
        public var endHandle: UInt16
    }

    /// A characteristic's handles and declared properties (§3.3).
    public struct Characteristic: Hashable, Sendable {
        public var uuid: BluetoothUUID
        public var properties: CharacteristicProperties
        public var declarationHandle: UInt16
        public var valueHandle: UInt16
        /// The Client Characteristic Configuration descriptor, present when notify or indicate is set.
        public var cccdHandle: UInt16?
    }

    /// Every attribute, in handle order; the attribute with handle `h` is at index `h - 1`.
    public private(set) var attributes: [Attribute]
    public private(set) var services: [Service]
    public private(set) var characteristics: [Characteristic]

    /// The highest handle in use, 0 for an empty database.
    public var lastHandle: UInt16 { UInt16(attributes.count) }

    /// The attribute at `handle`, nil when there is none.
    public func attribute(_ handle: UInt16) -> Attribute? {
        guard handle >= 1, Int(handle) <= attributes.count else { return nil }
        return attributes[Int(handle) - 1]
    }

    /// The characteristic whose value lives at `valueHandle`.
    public func characteristic(valueHandle: UInt16) -> Characteristic? {
        characteristics.first { $0.valueHandle == valueHandle }
    }

    /// The characteristic configured by the CCCD at `cccdHandle`.
    public func characteristic(cccdHandle: UInt16) -> Characteristic? {
        characteristics.first { $0.cccdHandle == cccdHandle }
    }

    /// The first characteristic with this UUID.
    public func characteristic(_ uuid: BluetoothUUID) -> Characteristic? {
        characteristics.first { $0.uuid == uuid }
    }

    /// The service whose group holds `handle`.
    public func service(containing handle: UInt16) -> Service? {
        services.first { $0.handle <= handle && handle <= $0.endHandle }
    }

    /// Replaces the value at `handle`; false (and no change) when there is no such attribute.
    @discardableResult
    public mutating func setValue(_ value: [UInt8], at handle: UInt16) -> Bool {
        guard attribute(handle) != nil else { return false }
        attributes[Int(handle) - 1].value = value
        return true
    }

    /// The handles ``Builder/addCharacteristic(_:properties:permissions:value:cccdPermissions:)`` allocated.
    public struct CharacteristicHandles: Hashable, Sendable {
        public var declarationHandle: UInt16
        public var valueHandle: UInt16
        public var cccdHandle: UInt16?
    }

    /// Lays attributes out in order: services, then their characteristics and descriptors.
    ///
    /// Misuse (a characteristic before any service, more than 0xFFFF attributes) is a programming
    /// error and traps.
    public struct Builder: Sendable {
        private var attributes: [Attribute] = []
        private var services: [Service] = []
        private var characteristics: [Characteristic] = []

        public init() {}

        private var nextHandle: UInt16 {
            precondition(attributes.count < 0xFFFF, "attribute handles exhausted")
            return UInt16(attributes.count + 1)
        }

        private mutating func append(_ type: BluetoothUUID, _ value: [UInt8], _ permissions: AttributePermissions) -> UInt16 {
            let handle = nextHandle
            attributes.append(Attribute(handle: handle, type: type, value: value, permissions: permissions))
            return handle
        }

        /// Adds a service declaration (value: the service UUID, little-endian; §3.1).
        /// - Returns: the declaration handle.
        @discardableResult
        public mutating func addService(_ uuid: BluetoothUUID, primary: Bool = true) -> UInt16 {
            closeService()
            let handle = append(primary ? .primaryService : .secondaryService, uuid.littleEndianBytes, .read)
            services.append(Service(uuid: uuid, isPrimary: primary, handle: handle, endHandle: handle))
            return handle
        }

        /// Adds a characteristic declaration, its value, and a CCCD when `properties` has notify or
        /// indicate. The declaration's value is properties, value handle and UUID (§3.3.1).
        /// - Parameters:
        ///   - permissions: what the client may do with the value attribute.
        ///   - cccdPermissions: what the client may do with the CCCD (readable and writable by default).
        @discardableResult
        public mutating func addCharacteristic(
            _ uuid: BluetoothUUID,
            properties: CharacteristicProperties,
            permissions: AttributePermissions,
            value: [UInt8] = [],
            cccdPermissions: AttributePermissions = .readWrite
        ) -> CharacteristicHandles {
            precondition(!services.isEmpty, "a characteristic needs a service first")
            let declaration = nextHandle
            var w = ByteWriter()
            w.write(properties.rawValue)
            w.write(declaration + 1)
            w.write(contentsOf: uuid.littleEndianBytes)
            _ = append(.characteristic, w.bytes, .read)
            let valueHandle = append(uuid, value, permissions)
            var cccd: UInt16?
            if !properties.isDisjoint(with: [.notify, .indicate]) {
                cccd = append(.clientCharacteristicConfiguration, [0, 0], cccdPermissions)
            }
            characteristics.append(Characteristic(
                uuid: uuid, properties: properties, declarationHandle: declaration,
                valueHandle: valueHandle, cccdHandle: cccd))
            return CharacteristicHandles(declarationHandle: declaration, valueHandle: valueHandle, cccdHandle: cccd)
        }

        /// Adds a descriptor after the last characteristic (§3.3.3).
        /// - Returns: its handle.
        @discardableResult
        public mutating func addDescriptor(
            _ uuid: BluetoothUUID, permissions: AttributePermissions, value: [UInt8]
        ) -> UInt16 {
            precondition(!characteristics.isEmpty, "a descriptor needs a characteristic first")
            return append(uuid, value, permissions)
        }

        /// Adds the Generic Access service with a readable Device Name and Appearance
        /// (Core Vol 3 Part C §12.1–12.2).
        public mutating func addGenericAccessService(deviceName: String, appearance: UInt16) {
            addService(.genericAccess)
            addCharacteristic(.deviceName, properties: .read, permissions: .read, value: Array(deviceName.utf8))
            addCharacteristic(.appearance, properties: .read, permissions: .read,
                              value: [UInt8(truncatingIfNeeded: appearance), UInt8(truncatingIfNeeded: appearance >> 8)])
        }

        private mutating func closeService() {
            guard !services.isEmpty else { return }
            services[services.count - 1].endHandle = UInt16(attributes.count)
        }

        /// The finished database.
        public func build() -> AttributeDatabase {
            var copy = self
            copy.closeService()
            return AttributeDatabase(
                attributes: copy.attributes, services: copy.services, characteristics: copy.characteristics)
        }
    }
}
