// SPDX-License-Identifier: GPL-2.0-or-later
//
// Real Bluetooth: two controllers that can see each other (tools/vm/run.sh gives two btvirt LE
// controllers, hci0 and hci1). Enabled by CUFF_BT_HARDWARE=1 on a kernel with AF_BLUETOOTH;
// skipped otherwise, with the reason shown by the test runner.

import CuffCore
import CuffLogging
import CuffTestSupport
import Glibc
import Testing
@testable import BlueZ
import Transport

enum BTHardware {
    static let requested = getenv("CUFF_BT_HARDWARE").map { String(cString: $0) } == "1"
    static let kernelHasBluetooth: Bool = {
        let fd = socket(AF_BLUETOOTH, CInt(SOCK_SEQPACKET.rawValue), 0 /* BTPROTO_L2CAP */)
        if fd >= 0 { close(fd) }
        return fd >= 0
    }()
    static let available = requested && kernelHasBluetooth
    static let skipReason: Comment =
        requested
        ? "CUFF_BT_HARDWARE=1 but this kernel has no AF_BLUETOOTH: run inside the VM (tools/vm/run.sh)"
        : "needs two Bluetooth LE controllers: set CUFF_BT_HARDWARE=1 (tools/vm/run.sh does, with btvirt)"

    static func adapter(_ variable: String, _ fallback: UInt16) -> BluetoothAdapter {
        if let v = getenv(variable), let a = try? BluetoothAdapter(parsing: String(cString: v)) { return a }
        return BluetoothAdapter(index: fallback)
    }
    /// The simulator's side (listens, advertises).
    static let peripheral = adapter("CUFF_BT_PERIPHERAL", 0)
    /// The client's side (scans, connects).
    static let central = adapter("CUFF_BT_CENTRAL", 1)
}

@Suite(
    "BlueZ on real controllers", .serialized, .enabled(if: BTHardware.available, BTHardware.skipReason),
    .timeLimit(.minutes(1)))
struct HardwareTests {
    init() throws {
        try BTHardware.peripheral.powerOn()
        try BTHardware.central.powerOn()
    }

    @Test func adaptersAreListedAndUp() throws {
        let all = try BluetoothAdapter.list()
        #expect(all.contains(BTHardware.peripheral))
        #expect(all.contains(BTHardware.central))
        let p = try BTHardware.peripheral.info()
        #expect(p.isUp)
        #expect(p.address.rawValue != 0)
        print(
            "hardware: peripheral \(p.adapter) \(p.address), central \(BTHardware.central) \(try BTHardware.central.info().address)"
        )
        print("hardware: bluetoothd running: \(BluetoothDaemon.isRunning)")
    }

    @Test func advertiseOnOneScanOnTheOther() throws {
        let target = try BTHardware.peripheral.info().address
        let advertiser = try LEAdvertiser(adapter: BTHardware.peripheral, name: "cuff-probe")
        try advertiser.start()
        defer { advertiser.stop() }
        let scanner = try LEScanner(adapter: BTHardware.central)
        defer { scanner.stop() }
        let found = try scanner.collect(for: .seconds(10)) {
            $0.address == target && $0.localName == "cuff-probe" && $0.isBloodPressureCuff
        }
        for note in scanner.notes { print("hardware: scan note: \(note)") }
        let report = try #require(found.first { $0.address == target }, "no advertisement from \(target) in 10 s")
        print("hardware: scan → \(report.json.serialized())")
        #expect(report.localName == "cuff-probe")
        #expect(report.serviceUUIDs16 == [0x1810])
        #expect(report.flags == 0x06)
        #expect(report.connectable)
    }

    @Test func attOverL2CAPWithJustWorksPairing() throws {
        let peripheralAddress = try BTHardware.peripheral.info().address
        // The agent answers on this loop, which runs while the link's security is raised.
        let loop = try EventLoop()
        let agent = try PairingAgent(loop: loop, logger: LogRecorder().logger())
        defer {
            agent.stop()
            for l in agent.log { print("hardware: \(l)") }
        }
        let listener = try L2CAPATTListener(adapter: BTHardware.peripheral)
        defer { listener.close() }
        let advertiser = try LEAdvertiser(adapter: BTHardware.peripheral, name: "cuff-probe")
        try advertiser.start()
        defer { advertiser.stop() }

        // Peripheral side on its own thread: accept, answer the MTU request, indicate, await the confirmation.
        let server = Background { () -> Result<[String], TransportError> in
            Result { () throws(TransportError) -> [String] in
                guard let link = try listener.accept(timeout: .seconds(20)) else { return ["accept timed out"] }
                defer { link.close() }
                var log = ["accepted \(link.peerDescription)"]
                guard case .pdu(let mtu) = try link.next(timeout: .seconds(40)), mtu.first == 0x02 else {
                    return log + ["no MTU request"]
                }
                try link.send([0x03, 0xF7, 0x00])
                try link.send([0x1D, 0x03, 0x00, 0x00, 0x78, 0x00, 0x50, 0x00, 0x5D, 0x00])
                guard case .pdu(let cfm) = try link.next(timeout: .seconds(10)), cfm == [0x1E] else {
                    return log + ["no confirmation"]
                }
                log.append("confirmed at \(link.securityLevel)")
                try link.send([0x1B, 0x03, 0x00, 0x01])  // a notification: "got it", so the central may close
                // The central closes: we must see .closed, not a 0-byte PDU.
                let end = try link.next(timeout: .seconds(10))
                log.append("end: \(end)")
                return log
            }
        }

        let start = MonotonicClock.now()
        let link = try L2CAPATTBearer.connect(adapter: BTHardware.central, to: peripheralAddress, timeout: .seconds(20))
        print(
            "hardware: connected to \(link.peerDescription) in \(MonotonicClock.now() - start), security \(link.securityLevel)"
        )
        #expect(link.securityLevel == .low)
        let pairStart = MonotonicClock.now()
        try link.raiseSecurity(to: .medium, on: loop)
        print("hardware: security \(link.securityLevel) after \(MonotonicClock.now() - pairStart)")
        #expect(link.securityLevel >= .medium)
        try link.send([0x02, 0x05, 0x02])  // Exchange MTU Request, 517
        #expect(try link.next(timeout: .seconds(10)) == .pdu([0x03, 0xF7, 0x00]))
        #expect(
            try link.next(timeout: .seconds(10)) == .pdu([0x1D, 0x03, 0x00, 0x00, 0x78, 0x00, 0x50, 0x00, 0x5D, 0x00]))
        try link.send([0x1E])
        // Close only once the peripheral has the confirmation (it notifies), then it must see .closed.
        #expect(try link.next(timeout: .seconds(10)) == .pdu([0x1B, 0x03, 0x00, 0x01]))
        link.close()
        let serverLog = try #require(server.join(limit: .seconds(60))).get()
        for l in serverLog { print("hardware: peripheral \(l)") }
        #expect(serverLog.contains { $0.hasPrefix("confirmed at") })
        #expect(serverLog.last?.hasPrefix("end: closed(") == true)
        #expect(agent.confirmationsAnswered >= 1, "the kernel asked user space to confirm Just Works")
        #expect(agent.failures == 0)

        // The controller stopped advertising when the central connected; after the disconnect
        // the simulator turns it on again and can be found again.
        try advertiser.restart()
        let scanner = try LEScanner(adapter: BTHardware.central)
        defer { scanner.stop() }
        let again = try scanner.collect(for: .seconds(10)) { $0.address == peripheralAddress }
        #expect(again.contains { $0.address == peripheralAddress }, "advertising again after the disconnect")
    }

    @Test func connectingToNobodyFailsClearly() throws {
        let nobody = BluetoothAddress("00:AA:01:99:99:99")!
        let start = MonotonicClock.now()
        let error = #expect(throws: TransportError.self) {
            _ = try L2CAPATTBearer.connect(adapter: BTHardware.central, to: nobody, timeout: .seconds(2))
        }
        print("hardware: connect to nobody → \(error?.message ?? "-") after \(MonotonicClock.now() - start)")
        #expect(error?.code == .timedOut || error?.errno == ECONNREFUSED || error?.errno == EHOSTDOWN)
    }
}
