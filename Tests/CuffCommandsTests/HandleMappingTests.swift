// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import Capture
import CuffCommands
import CuffSimulator
import Testing

/// `--handle HANDLE=UUID` parsed in process, and a fleet member's identity.
@Suite struct HandleMappingTests {
    @Test func handlesAndTheirCharacteristics() throws {
        #expect(
            try HandleMapping(parsing: "0x0012=2a35")
                == HandleMapping(handle: 0x12, characteristic: .bloodPressureMeasurement))
        #expect(
            try HandleMapping(parsing: "15=0x2A36")
                == HandleMapping(handle: 0x15, characteristic: .intermediateCuffPressure))
        #expect(
            try HandleMapping(parsing: "0X0020=00002a35-0000-1000-8000-00805f9b34fb").characteristic
                == .bloodPressureMeasurement)
        #expect(try HandleMapping(parsing: "0x30=\(CuffControl.controlPointUUID)").characteristic == .cuffControl)
    }

    @Test(arguments: [
        ("0x0012", HandleMapping.ParseError.Code.notAPair), ("0x0000=2a35", .badHandle), ("zz=2a35", .badHandle),
        ("0x0012=ffff", .unknownCharacteristic), ("0x0012=", .notAPair),
    ])
    func refused(_ text: String, _ code: HandleMapping.ParseError.Code) {
        #expect(throws: HandleMapping.ParseError.self) { try HandleMapping(parsing: text) }
        do { _ = try HandleMapping(parsing: text) } catch { #expect(error.code == code) }
    }

    @Test func theLastMappingOfAHandleWins() {
        let o = HandleMapping.overrides([
            .init(handle: 3, characteristic: .bloodPressureMeasurement),
            .init(handle: 3, characteristic: .intermediateCuffPressure),
        ])
        #expect(o == [3: .intermediateCuffPressure])
    }

    @Test func aFleetMemberHasItsOwnSeedNameAndSerial() {
        var c = SimulatorConfiguration()
        c.seed = 7
        let m = c.fleetMember(12)
        #expect(m.seed == 18)
        #expect(m.name == "cuff-sim-0012")
        #expect(m.serial == "SIM-000012")
        #expect(c.fleetMember(123_456).name == "cuff-sim-123456")
    }
}
