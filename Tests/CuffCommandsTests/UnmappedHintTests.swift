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
            Self.unmapped(0x40, [0x12: .init(indications: 1), 0x15: .init(notifications: 5)]),
            Self.unmapped(0x41, address: "AA:BB:CC:DD:EE:02", [0x12: .init(indications: 2)]),
            Self.unmapped(0x42, [0x12: .init(indications: 2), 0x15: .init(notifications: 3)]),
            Self.unmapped(0x43, adapter: 1, [0x12: .init(indications: 1), 0x15: .init(notifications: 1)]),
        ])
        #expect(hints.count == 3)
        #expect(hints[0].connections == 2)
        #expect(hints[0].first.connectionHandle == 0x40)
        #expect(hints[0].totals[0x12] == .init(indications: 3))
        #expect(hints[0].totals[0x15] == .init(notifications: 8))
        #expect(hints[1].first.address == "AA:BB:CC:DD:EE:02")
        #expect(hints[2].first.adapter == 1)
        #expect(
            hints[0].lines(file: "x.btsnoop") == [
                "hci0 2 connections to AA:BB:CC:DD:EE:01: no service discovery in the capture, so these value handles are unknown: 0x0012 (3 indications), 0x0015 (8 notifications).",
                "map them with --handle HANDLE=UUID (indications usually carry the Blood Pressure Measurement 2a35, or 2b34 enhanced; notifications the Intermediate Cuff Pressure 2a36, or 2b35), e.g. cuff replay x.btsnoop --handle 0x0012=2a35 --handle 0x0015=2a36",
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
        #expect(lines[0].hasSuffix("their values were not read: 0x0014 (3 indications)."), "\(lines[0])")
        #expect(hints[0].lines(file: "f.btsnoop")[0].contains("no service discovery in the capture"))
    }
}
