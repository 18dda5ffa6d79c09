// SPDX-License-Identifier: GPL-2.0-or-later
@testable import Capture
import ReplayEngine
import Testing

/// `cuff replay`'s hint grouping in process: connections with the same controller, device and
/// handles make one hint with their counts added; the lines name the handles and the options.
@Suite struct UnmappedHintTests {
    typealias Unmapped = CaptureReplay.Unmapped

    static func unmapped(
        _ connection: UInt16, address: String = "AA:BB:CC:DD:EE:01", adapter: UInt16 = 0,
        _ handles: [UInt16: Unmapped.Counts]
    ) -> Unmapped {
        Unmapped(adapter: adapter, connectionHandle: connection, address: address, handles: handles)
    }

    @Test func connectionsShowingTheSameHandlesMakeOneHint() {
        let hints = UnmappedHint.group([
            Self.unmapped(
                0x40,
                [
                    0x12: .init(indications: 1, looksLike: .bloodPressureMeasurement),
                    0x15: .init(notifications: 5, looksLike: .intermediateCuffPressure),
                ]),
            Self.unmapped(0x41, address: "AA:BB:CC:DD:EE:02", [0x12: .init(indications: 2)]),
            Self.unmapped(0x42, [0x12: .init(indications: 2), 0x15: .init(notifications: 3)]),
            Self.unmapped(0x43, adapter: 1, [0x12: .init(indications: 1), 0x15: .init(notifications: 1)]),
        ])
        #expect(hints.count == 3)
        #expect(hints[0].connections == 2)
        #expect(hints[0].first.connectionHandle == 0x40)
        #expect(hints[0].totals[0x12] == .init(indications: 3, looksLike: .bloodPressureMeasurement))
        #expect(hints[0].totals[0x15] == .init(notifications: 8, looksLike: .intermediateCuffPressure))
        #expect(hints[1].first.address == "AA:BB:CC:DD:EE:02")
        #expect(hints[2].first.adapter == 1)
        #expect(
            hints[0].lines(file: "x.btsnoop") == [
                "hci0 2 connections to AA:BB:CC:DD:EE:01: no service discovery in the capture, so these value handles are unknown: 0x0012 (3 indications; like Blood Pressure Measurement 2a35), 0x0015 (8 notifications; like Intermediate Cuff Pressure 2a36).",
                "map them with --handle HANDLE=UUID; by what their values look like: cuff replay x.btsnoop --handle 0x0012=2a35 --handle 0x0015=2a36",
            ])
        #expect(hints[1].lines(file: "x.btsnoop")[0].hasPrefix("hci0 connection 0x0041 to AA:BB:CC:DD:EE:02:"))
    }

    @Test func nothingUnmappedNoHint() {
        #expect(UnmappedHint.group([]).isEmpty)
    }

    /// Handles an earlier connection's map does not cover are said as such (the connection had a
    /// map), and are not grouped with a connection that had none.
    @Test func handlesAnEarlierMapLacksAreSaidSo() {
        var inherited = Self.unmapped(0x41, [0x14: .init(indications: 3)])
        inherited.usedEarlierMap = true
        let hints = UnmappedHint.group([Self.unmapped(0x40, [0x14: .init(indications: 1)]), inherited])
        #expect(hints.count == 2)
        let lines = hints[1].lines(file: "f.btsnoop")
        #expect(
            lines[0].contains(
                "the handles an earlier connection to this address discovered do not cover these value handles"),
            "\(lines[0])")
        #expect(
            lines[0].hasSuffix("their values were not read: 0x0014 (3 indications; like no Blood Pressure value)."),
            "\(lines[0])")
        #expect(hints[0].lines(file: "f.btsnoop")[0].contains("no service discovery in the capture"))
    }

    /// Each handle's example UUID is what its values look like; control-point responses and
    /// values that look like no reading are named as such and left out of the example (following
    /// a guessed 2a35 for them read records and RACP responses as nonsense results).
    @Test func theExampleMapsOnlyHandlesWhoseValuesLookLikeReadings() {
        let hints = UnmappedHint.group([
            Self.unmapped(
                0x40,
                [
                    0x06: .init(indications: 1, looksLike: .bloodPressureRecord),
                    0x09: .init(notifications: 189, looksLike: .enhancedIntermediateCuffPressure),
                    0x14: .init(indications: 3),
                    0x17: .init(indications: 1, looksLike: .recordAccessControlPoint),
                ])
        ])
        let lines = hints[0].lines(file: "f.btsnoop")
        #expect(
            lines[0].hasSuffix(
                "0x0006 (1 indication; like Blood Pressure Record 2b36), 0x0009 (189 notifications; like Enhanced Intermediate Cuff Pressure 2b35), 0x0014 (3 indications; like no Blood Pressure value), 0x0017 (1 indication; Record Access Control Point responses 2a52, no readings)."
            ), "\(lines[0])")
        #expect(
            lines[1]
                == "map them with --handle HANDLE=UUID; by what their values look like: cuff replay f.btsnoop --handle 0x0006=2b36 --handle 0x0009=2b35 (the 2 handles with no reading left out)"
        )
        let none = UnmappedHint.group([
            Self.unmapped(0x40, [0x17: .init(indications: 1, looksLike: .recordAccessControlPoint)])
        ])
        #expect(
            none[0].lines(file: "f.btsnoop")[1].hasPrefix("none of their values looks like a Blood Pressure reading"))
    }
}
