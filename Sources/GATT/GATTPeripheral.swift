// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// What a peripheral state machine asks its driver to do.
public enum PeripheralOutput: Sendable, Hashable {
    /// Send this PDU on the bearer.
    case send([UInt8])
    /// Close the link (the peripheral ends the connection), saying why.
    case disconnect(String)
    case log(String)
}

/// A peripheral as a pure state machine over a GATT server: the simulated cuff, or a captured
/// one played back. One driver serves any of them over a bearer with a clock.
///
/// Each event appends what it calls for to `out`, an array the driver owns and empties between
/// events with `removeAll(keepingCapacity: true)` (the ``ActionMachine`` convention); the
/// array-returning forms in the extension are for tests and drivers off the hot path.
public protocol GATTPeripheral: Sendable {
    /// The earliest time the driver must call ``tick(now:into:)``.
    var nextDeadline: Timestamp? { get }
    /// A client connected; `client` names it when the transport knows (a Bluetooth address).
    mutating func connected(now: Timestamp, client: String?, into out: inout [PeripheralOutput])
    mutating func disconnected(now: Timestamp, into out: inout [PeripheralOutput])
    mutating func linkSecurityChanged(_ level: SecurityLevel)
    mutating func receive(_ pdu: [UInt8], now: Timestamp, into out: inout [PeripheralOutput])
    /// The device's button (SIGUSR1).
    mutating func buttonPressed(now: Timestamp, into out: inout [PeripheralOutput])
    mutating func tick(now: Timestamp, into out: inout [PeripheralOutput])
    /// The driver starts running the device's clock (before the first client).
    mutating func poweredOn(now: Timestamp)
    /// The attribute table it serves (what a GATT application registered with bluetoothd exports).
    var database: AttributeDatabase { get }
    /// What it advertises on an adapter (default ``PeripheralAdvertisement/bloodPressure``).
    var advertisement: PeripheralAdvertisement { get }
}

extension GATTPeripheral {
    public mutating func poweredOn(now: Timestamp) {}

    // The array-returning forms (tests, and drivers off the hot path): each is its `into:` form
    // into a new array.

    public mutating func connected(now: Timestamp, client: String? = nil) -> [PeripheralOutput] {
        var out: [PeripheralOutput] = []
        connected(now: now, client: client, into: &out)
        return out
    }

    public mutating func disconnected(now: Timestamp) -> [PeripheralOutput] {
        var out: [PeripheralOutput] = []
        disconnected(now: now, into: &out)
        return out
    }

    public mutating func receive(_ pdu: [UInt8], now: Timestamp) -> [PeripheralOutput] {
        var out: [PeripheralOutput] = []
        receive(pdu, now: now, into: &out)
        return out
    }

    public mutating func buttonPressed(now: Timestamp) -> [PeripheralOutput] {
        var out: [PeripheralOutput] = []
        buttonPressed(now: now, into: &out)
        return out
    }

    public mutating func tick(now: Timestamp) -> [PeripheralOutput] {
        var out: [PeripheralOutput] = []
        tick(now: now, into: &out)
        return out
    }
}

/// What a peripheral advertises when it is served on a Bluetooth adapter: its 16-bit service
/// UUIDs, its manufacturer data, and (when it has one of its own) its local name.
public struct PeripheralAdvertisement: Sendable, Hashable {
    /// The advertised local name; nil: the name the command was given (or its default).
    public var name: String?
    /// Complete list of 16-bit service UUIDs.
    public var serviceUUIDs16: [UInt16]
    /// Company identifier → data (AD type 0xFF; bluetoothd's `ManufacturerData`).
    public var manufacturerData: [UInt16: [UInt8]]

    public init(name: String? = nil, serviceUUIDs16: [UInt16] = [0x1810], manufacturerData: [UInt16: [UInt8]] = [:]) {
        self.name = name
        self.serviceUUIDs16 = serviceUUIDs16
        self.manufacturerData = manufacturerData
    }

    /// A standard blood-pressure cuff's: the Blood Pressure Service, no manufacturer data.
    public static let bloodPressure = PeripheralAdvertisement()

    /// For logs: `0x1810`, `0xFE4A and company 0x020E's data`.
    public var summary: String {
        let services = serviceUUIDs16.map { "0x" + Hex.encode([UInt8($0 >> 8), UInt8($0 & 0xFF)]).uppercased() }
        let companies = manufacturerData.keys.sorted().map {
            "company 0x" + Hex.encode([UInt8($0 >> 8), UInt8($0 & 0xFF)]).uppercased() + "'s data"
        }
        return (services + companies).joined(separator: " and ")
    }
}

extension GATTPeripheral {
    /// A standard blood-pressure cuff's advertisement, unless the peripheral says otherwise.
    public var advertisement: PeripheralAdvertisement { .bloodPressure }
}
