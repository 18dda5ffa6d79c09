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

    /// Every attribute, in increasing handle order. A database the ``Builder`` numbers itself has
    /// no gaps (the attribute with handle `h` is at index `h - 1`); one laid out with explicit
    /// handles (a captured device's) may have gaps.
    public private(set) var attributes: [Attribute]
    public private(set) var services: [Service]
    public private(set) var characteristics: [Characteristic]

    /// The highest handle in use, 0 for an empty database.
    public var lastHandle: UInt16 { attributes.last?.handle ?? 0 }

    /// The attribute at `handle`, nil when there is none.
    public func attribute(_ handle: UInt16) -> Attribute? {
        index(of: handle).map { attributes[$0] }
    }

    /// Where the attribute with `handle` is in ``attributes``.
    func index(of handle: UInt16) -> Int? {
        let guess = Int(handle) - 1
        if guess >= 0, guess < attributes.count, attributes[guess].handle == handle { return guess }
        let i = lowerBound(handle)
        return i < attributes.count && attributes[i].handle == handle ? i : nil
    }

    /// The index of the first attribute whose handle is at least `handle`.
    func lowerBound(_ handle: UInt16) -> Int {
        var lo = 0, hi = attributes.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if attributes[mid].handle < handle { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The attributes whose handles lie in `start...end`.
    public func attributes(in start: UInt16, _ end: UInt16) -> ArraySlice<Attribute> {
        guard start <= end else { return [] }
        let lo = lowerBound(start)
        let hi = end == .max ? attributes.count : lowerBound(end + 1)
        return attributes[lo..<max(lo, hi)]
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
        guard let i = index(of: handle) else { return false }
        attributes[i].value = value
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
        /// The handle the next attribute gets (one past the last, unless ``skip(to:)`` moved it).
        private var next: UInt32 = 1
        /// An end handle given for the open service (``endService(at:)``).
        private var explicitEnd: UInt16?

        public init() {}

        /// The handle the next attribute gets.
        public var upcomingHandle: UInt16 { nextHandle }

        private var nextHandle: UInt16 {
            precondition(next <= 0xFFFF, "attribute handles exhausted")
            return UInt16(next)
        }

        /// Leaves the handles up to `handle` unused: the next attribute gets `handle` (a layout
        /// copied from a device, which may have gaps). Going backwards is a programming error.
        public mutating func skip(to handle: UInt16) {
            precondition(UInt32(handle) >= next, "handles must increase: \(handle) after \(next - 1)")
            next = UInt32(handle)
        }

        /// Ends the open service's group at `handle` (at least its last attribute), as a device
        /// may declare a group that runs past its attributes (to 0xFFFF, say).
        public mutating func endService(at handle: UInt16) {
            explicitEnd = handle
        }

        private mutating func append(_ type: BluetoothUUID, _ value: [UInt8], _ permissions: AttributePermissions)
            -> UInt16
        {
            let handle = nextHandle
            attributes.append(Attribute(handle: handle, type: type, value: value, permissions: permissions))
            next = UInt32(handle) + 1
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
            characteristics.append(
                Characteristic(
                    uuid: uuid, properties: properties, declarationHandle: declaration,
                    valueHandle: valueHandle, cccdHandle: cccd))
            return CharacteristicHandles(declarationHandle: declaration, valueHandle: valueHandle, cccdHandle: cccd)
        }

        /// Adds a characteristic at `declarationHandle` (its value at the next handle) with the
        /// descriptors a device showed, at their own handles: a layout copied from a device. A
        /// Client Characteristic Configuration descriptor among them becomes the characteristic's
        /// CCCD (readable and writable); the others are readable.
        @discardableResult
        public mutating func addCharacteristic(
            _ uuid: BluetoothUUID, properties: CharacteristicProperties, permissions: AttributePermissions,
            value: [UInt8] = [],
            declarationHandle: UInt16, descriptors: [(handle: UInt16, uuid: BluetoothUUID, value: [UInt8])]
        ) -> CharacteristicHandles {
            precondition(!services.isEmpty, "a characteristic needs a service first")
            skip(to: declarationHandle)
            var w = ByteWriter()
            w.write(properties.rawValue)
            w.write(declarationHandle &+ 1)
            w.write(contentsOf: uuid.littleEndianBytes)
            _ = append(.characteristic, w.bytes, .read)
            let valueHandle = append(uuid, value, permissions)
            var cccd: UInt16?
            for d in descriptors.sorted(by: { $0.handle < $1.handle }) where UInt32(d.handle) >= next {
                skip(to: d.handle)
                if d.uuid == .clientCharacteristicConfiguration && cccd == nil {
                    cccd = append(d.uuid, d.value.isEmpty ? [0, 0] : d.value, .readWrite)
                } else {
                    _ = append(d.uuid, d.value, .read)
                }
            }
            characteristics.append(
                Characteristic(
                    uuid: uuid, properties: properties, declarationHandle: declarationHandle, valueHandle: valueHandle,
                    cccdHandle: cccd))
            return CharacteristicHandles(
                declarationHandle: declarationHandle, valueHandle: valueHandle, cccdHandle: cccd)
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
            addCharacteristic(
                .appearance, properties: .read, permissions: .read,
                value: [UInt8(truncatingIfNeeded: appearance), UInt8(truncatingIfNeeded: appearance >> 8)])
        }

        private mutating func closeService() {
            guard !services.isEmpty else { return }
            let last = attributes.last?.handle ?? 0
            services[services.count - 1].endHandle = max(last, explicitEnd ?? 0)
            explicitEnd = nil
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
