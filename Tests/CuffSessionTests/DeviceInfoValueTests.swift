// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import Testing

@testable import CuffSession

/// `DeviceInfo` keeps its fields in one shared box: it must still behave as a value. A change to
/// a copy leaves the original alone (and every other copy), and equality and hashing are the
/// fields', whether two values share the box or not.
@Suite struct DeviceInfoValueTests {
    static let base = DeviceInfo(
        address: "AA:BB:CC:DD:EE:FF", name: "cuff-sim", manufacturer: "cuff project", model: "CUFF-SIM 1",
        serial: "SIM-000001", firmware: "0.1.0", features: BloodPressureFeature(rawValue: 0x0021))

    /// Each field changed on a copy, through every way a value is changed (a stored copy, a
    /// record holding one, `inout`).
    @Test func aChangedCopyLeavesTheOthersAlone() {
        let changes: [(String, (inout DeviceInfo) -> Void)] = [
            ("address", { $0.address = "11:22:33:44:55:66" }), ("name", { $0.name = nil }),
            ("manufacturer", { $0.manufacturer = "other" }), ("model", { $0.model = "M" }),
            ("serial", { $0.serial = "S" }), ("firmware", { $0.firmware = nil }), ("features", { $0.features = nil }),
        ]
        for (field, change) in changes {
            let original = Self.base
            var copy = original
            let third = copy
            change(&copy)
            #expect(copy != original, "\(field)")
            #expect(original == Self.base && third == Self.base, "changing \(field) of a copy changed the original")
            #expect(original.name == "cuff-sim" && original.features == BloodPressureFeature(rawValue: 0x0021))
            var record = SessionRecord(event: .start, device: original, at: .init(monotonic: .zero, wallMicros: 0))
            change(&record.device)
            #expect(record.device == copy && original == Self.base, "\(field) through a record")
        }
    }

    /// Equal fields are equal values with equal hashes, shared box or not; any field that
    /// differs makes them differ.
    @Test func equalityAndHashAreTheFields() {
        let separate = DeviceInfo(
            address: String(decoding: Array("AA:BB:CC:DD:EE:FF".utf8), as: UTF8.self), name: "cuff-sim",
            manufacturer: "cuff project", model: "CUFF-SIM 1", serial: "SIM-000001", firmware: "0.1.0",
            features: BloodPressureFeature(rawValue: 0x0021))
        #expect(separate == Self.base && separate.hashValue == Self.base.hashValue)
        #expect(Set([Self.base, separate, Self.base]).count == 1)
        var differs = separate
        differs.firmware = "0.1.1"
        #expect(differs != Self.base && Set([Self.base, differs]).count == 2)
        differs = separate
        differs.features = BloodPressureFeature(rawValue: 0x0001)
        #expect(differs != Self.base)
        #expect(DeviceInfo(address: "x") == DeviceInfo(address: "x"))
        #expect(DeviceInfo(address: "x") != DeviceInfo(address: "x", name: ""))
    }
}
