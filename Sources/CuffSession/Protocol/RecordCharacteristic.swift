// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure

/// What carried a result: a Blood Pressure Service characteristic (`2A35`, `2B34`, `2B36`), or a
/// cuff protocol's own source (`omron`).
///
/// The text (``uuidString``) is what a record's `characteristic` key and a store's
/// `characteristic` column hold. A BPS characteristic keeps its UUID text, so records of the
/// standard session read and print exactly as before; another protocol names its source with
/// ``named(_:)``, and the name round-trips through a store.
public struct RecordCharacteristic: Sendable, Hashable, CustomStringConvertible {
    @usableFromInline enum Backing: Sendable, Hashable {
        case bps(BPSCharacteristic)
        case named(String)
    }
    @usableFromInline let backing: Backing

    /// A BPS characteristic.
    public static func bps(_ c: BPSCharacteristic) -> RecordCharacteristic { RecordCharacteristic(backing: .bps(c)) }

    /// A protocol's own source: `omron` (see ``init(argument:)`` for the names a store reads back).
    /// A name that parses as a BPS characteristic's UUID is that characteristic.
    public static func named(_ name: String) -> RecordCharacteristic {
        if let c = BPSCharacteristic(argument: name) { return .bps(c) }
        return RecordCharacteristic(backing: .named(name))
    }

    public static let bloodPressureMeasurement = RecordCharacteristic.bps(.bloodPressureMeasurement)
    public static let enhancedBloodPressureMeasurement = RecordCharacteristic.bps(.enhancedBloodPressureMeasurement)
    public static let bloodPressureRecord = RecordCharacteristic.bps(.bloodPressureRecord)

    /// The BPS characteristic, when it is one.
    public var bps: BPSCharacteristic? {
        if case let .bps(c) = backing { return c }
        return nil
    }

    /// `2A35` for a BPS characteristic, the name otherwise (`omron`).
    public var uuidString: String {
        switch backing {
        case let .bps(c): c.uuidString
        case let .named(n): n
        }
    }

    public var description: String { uuidString }

    /// Parses what ``uuidString`` gives: a BPS characteristic's UUID (`2A35`, `0x2a35`), or a
    /// protocol's name (`omron`: a lowercase letter, then lowercase letters, digits, `-` or `_`).
    /// Nil for anything else, including a UUID that names no BPS characteristic (`2A99`).
    public init?(argument: String) {
        if let c = BPSCharacteristic(argument: argument) {
            self = .bps(c)
            return
        }
        let u = argument.utf8
        guard let first = u.first, (0x61...0x7A).contains(first), u.count <= 32,
            u.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D || $0 == 0x5F }),
            !(u.count == 4 && u.allSatisfy({ (0x61...0x66).contains($0) || (0x30...0x39).contains($0) }))
        else { return nil }
        self.init(backing: .named(argument))
    }

    init(backing: Backing) { self.backing = backing }
}
