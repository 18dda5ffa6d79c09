// SPDX-License-Identifier: GPL-2.0-or-later
import CuffLogging
import Foundation
import Testing
import Capture
import CuffCore
import CuffRuntime
import CuffSession
import CuffSimulator
import GATT
import Transport

/// The protocol seam, proven with ``SeamTestProtocol``: registered from the test, chosen from
/// what the device offers (or forced), run live over the simulated link and a real socket,
/// followed in a replay, served as a simulated cuff — with no change to the CLI.
@Suite struct ProtocolSeamTests {
    static var registry: CuffProtocolRegistry {
        var r = CuffProtocolRegistry.builtIn
        r.register(SeamTestProtocol())
        return r
    }

    static func configuration(forced: CuffProtocolID? = nil) -> CuffSessionConfiguration {
        var c = CuffSessionConfiguration(address: "simulated:seam")
        c.protocols = registry
        c.forcedProtocol = forced
        c.settle = .milliseconds(200)
        c.timeout = .seconds(30)
        return c
    }

    static func profile(_ services: BluetoothUUID...) -> GATTProfile {
        GATTProfile(
            services: services.enumerated().map { i, u in
                GATTProfile.Service(uuid: u, handle: UInt16(1 + 10 * i), endHandle: UInt16(10 + 10 * i))
            })
    }

    @Test func registryChoosesFromWhatTheDeviceOffers() {
        let r = Self.registry
        let bps = BluetoothUUID(0x1810)
        #expect(CuffProtocolRegistry.builtIn.ids == [.bps, .omron, "microlife", "yonker"])
        #expect(r.ids == [.bps, .omron, "microlife", "yonker", SeamTestProtocol.id])
        #expect(r.select(DeviceOffer()).id == .bps, "nothing recognised: the default")
        #expect(r.select(DeviceOffer(name: "seam")).id == .bps)
        #expect(r.select(DeviceOffer(advertisedServices: [SeamTestProtocol.service])).id == SeamTestProtocol.id)
        #expect(
            r.select(DeviceOffer(advertisedServices: [bps, SeamTestProtocol.service])).id == .bps,
            "a tie goes to the earlier one")
        #expect(r.select(DeviceOffer(profile: Self.profile(SeamTestProtocol.service))).id == SeamTestProtocol.id)
        #expect(r.select(DeviceOffer(profile: Self.profile(bps))).id == .bps)
        #expect(
            r.select(DeviceOffer(profile: Self.profile(bps)), forced: SeamTestProtocol.id).id == SeamTestProtocol.id)
        #expect(r.select(DeviceOffer(), forced: "no-such-protocol").id == .bps)
        #expect(
            r.handOver(from: .bps, DeviceOffer(profile: Self.profile(SeamTestProtocol.service)))?.id
                == SeamTestProtocol.id)
        #expect(r.handOver(from: .bps, DeviceOffer(profile: Self.profile(bps, SeamTestProtocol.service))) == nil)
        #expect(r.handOver(from: .bps, DeviceOffer(profile: Self.profile(bps))) == nil)
        #expect(
            CuffProtocolRegistry.builtIn.handOver(
                from: .bps, DeviceOffer(profile: Self.profile(SeamTestProtocol.service))) == nil)
    }

    @Test func recordCharacteristicNamesAnotherSourceAndKeepsBPSText() {
        #expect(RecordCharacteristic.bloodPressureMeasurement.uuidString == "2A35")
        #expect(RecordCharacteristic(argument: "2a35") == .bloodPressureMeasurement)
        #expect(RecordCharacteristic(argument: "0x2B36") == .bloodPressureRecord)
        #expect(RecordCharacteristic(argument: "omron")?.uuidString == "omron")
        #expect(RecordCharacteristic(argument: "omron")?.bps == nil)
        #expect(RecordCharacteristic.named("2B34") == .enhancedBloodPressureMeasurement)
        for bad in ["", "2a99", "2A99", "Omron", "om ron", "-x", "beef", String(repeating: "a", count: 33)] {
            #expect(RecordCharacteristic(argument: bad) == nil, "\(bad)")
        }
    }

    @Test func aStoredRecordIsRebuiltByTheProtocolThatNamesItsSource() throws {
        let at = EventTime(monotonic: .zero, wallMicros: 1_767_254_400_000_000)
        let device = DeviceInfo(address: "AA:BB:CC:DD:EE:FF")
        let r = try #require(
            Self.registry.storedRecord(
                SeamTestProtocol.source, raw: [120, 80, 60], device: device, receivedAt: at,
                stored: true, sequenceNumber: nil))
        let live = try #require(SeamTestProtocol.record([120, 80, 60], device: device, at: at))
        #expect(
            r.json
                == {
                    var l = live; l.stored = true; return l.json
                }())
        #expect(
            Self.registry.storedRecord(
                .bloodPressureMeasurement, raw: [0], device: device, receivedAt: at, stored: true, sequenceNumber: nil)
                == nil)
        #expect(
            CuffProtocolRegistry.builtIn.storedRecord(
                SeamTestProtocol.source, raw: [120, 80, 60], device: device, receivedAt: at,
                stored: true, sequenceNumber: nil) == nil)
    }

    struct Run {
        var outputs: [SessionOutput] = []
        var links: [LinkEvent] = []
        var logs: [String] = []
        var measurements: [MeasurementRecord] {
            outputs.compactMap { if case let .measurement(m) = $0 { m } else { nil } }
        }
        var ends: [SessionRecord] {
            outputs.compactMap { if case let .session(s) = $0, s.event == .end { s } else { nil } }
        }
    }

    /// A session on the in-process simulated link (virtual time), recording what crossed it.
    static func simulated(_ config: CuffSessionConfiguration, peripheral: (any GATTPeripheral)?) -> (
        Run, SessionOutcome, Int32
    ) {
        let box = SeamUnchecked(Run())
        let logs = LogRecorder()
        let hooks = SessionHooks(
            emit: { box.value.outputs.append($0) }, log: logs.logger(), link: { box.value.links.append($0) })
        var sim = SimulatorConfiguration()
        sim.name = "seam-cuff"
        let link = SimulatedLink(
            simulator: sim, session: config, hooks: hooks, speed: nil, wallStartMicros: 1_767_254_400_000_000,
            peripheral: peripheral)
        let outcome = link.run()
        box.value.logs = logs.lines
        return (box.value, outcome, link.central.exitCode)
    }

    @Test func standardSessionHandsADiscoveredLinkToTheProtocolThatFits() throws {
        let (run, outcome, exit) = Self.simulated(
            Self.configuration(), peripheral: SeamTestPeripheral(name: "seam-cuff", reading: [128, 82, 71]))
        #expect(outcome == .completed && exit == 0, "\(run.logs)")
        #expect(run.logs.contains { $0.contains("seam-test device; handing the link") }, "\(run.logs)")
        let m = try #require(run.measurements.first)
        #expect(run.measurements.count == 1)
        #expect(m.characteristic == SeamTestProtocol.source && m.raw == [128, 82, 71] && m.systolic.doubleValue == 128)
        let line = SessionOutput.measurement(m).json.serialized()
        #expect(
            line.hasPrefix(#"{"type":"measurement","characteristic":"seam-test","raw":"805247","systolic":128,"#),
            "\(line)")
        #expect(run.ends.map(\.outcome) == [.completed])
    }

    @Test func forcedProtocolRunsItsSimulatedCuffFromTheRegistry() throws {
        // No peripheral given: the simulated link asks the registry for the forced protocol's cuff.
        let (run, outcome, _) = Self.simulated(Self.configuration(forced: SeamTestProtocol.id), peripheral: nil)
        #expect(outcome == .completed, "\(run.logs)")
        #expect(run.measurements.map(\.raw) == [[128, 82, 71]])
        #expect(!run.logs.contains { $0.contains("handing the link") }, "forced: no hand-over")
    }

    @Test func withoutRegistrationTheStandardSessionFindsNoService() {
        var config = Self.configuration()
        config.protocols = .builtIn
        let (run, outcome, exit) = Self.simulated(
            config, peripheral: SeamTestPeripheral(name: "seam-cuff", reading: [128, 82, 71]))
        #expect(outcome == .serviceMissing && exit == SessionOutcome.serviceMissing.exitCode)
        #expect(run.measurements.isEmpty)
    }

    @Test func forcedProtocolOverARealSocket() throws {
        let (clientEnd, serverEnd) = try UnixSeqpacketBearer.pair()
        let driver = SeamUnchecked(
            PeripheralDriver(
                peripheral: SeamTestPeripheral(name: "seam-cuff", reading: [121, 80, 66]),
                clock: SimulationClock(speed: 100), signals: nil, log: .silent))
        let server = SeamUnchecked(serverEnd)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = driver.value.serve(server.value)
            done.signal()
        }
        let collected = SeamUnchecked(Run())
        let hooks = SessionHooks(emit: { collected.value.outputs.append($0) }, log: .silent)
        var config = Self.configuration(forced: SeamTestProtocol.id)
        config.address = "unix:socketpair"
        let central = CentralDriver(configuration: config, hooks: hooks, signals: nil)
        #expect(central.run(clientEnd) == .completed)
        #expect(central.central.protocolID == SeamTestProtocol.id)
        #expect(done.wait(timeout: .now() + 20) == .success)
        let ms = collected.value.measurements
        #expect(ms.map(\.raw) == [[121, 80, 66]] && ms.first?.device.address == "unix:socketpair")
    }

    /// The simulated session's link events as the HCI records a controller log would hold.
    static func capture(_ links: [LinkEvent]) throws -> [HCIRecord] {
        var rec = SessionRecorder()
        var records: [HCIRecord] = []
        for e in links {
            switch e {
            case let .connected(at):
                records += rec.connected(peer: BDAddress("00:AA:01:00:00:07")!, role: .central, at: at.monotonic)
            case let .pdu(sent, pdu, at):
                records += try rec.att(pdu, direction: sent ? .fromLocal : .toLocal, at: at.monotonic)
            case let .disconnected(at): records += rec.disconnected(at: at.monotonic)
            }
        }
        return records
    }

    static func replay(_ records: [HCIRecord], _ config: CuffSessionConfiguration) -> [ReplayOutput] {
        var replay = CaptureReplay(configuration: config)
        var out: [ReplayOutput] = []
        for r in records { replay.consume(r, into: &out) }
        replay.finish(after: nil, into: &out)
        return out
    }

    @Test func replayHandsTheConnectionToTheProtocolsObserver() throws {
        let (run, _, _) = Self.simulated(
            Self.configuration(), peripheral: SeamTestPeripheral(name: "seam-cuff", reading: [133, 88, 60]))
        let records = try Self.capture(run.links)
        #expect(records.count > 10)
        var config = Self.configuration()
        config.address = ""
        let out = Self.replay(records, config)
        let ms = out.compactMap { if case let .emit(.measurement(m)) = $0 { m } else { nil } }
        #expect(ms.map(\.raw) == [[133, 88, 60]], "\(out)")
        #expect(ms.first?.characteristic.uuidString == "seam-test" && ms.first?.device.address == "00:AA:01:00:00:07")
        #expect(out.contains { if case let .log(s) = $0 { s.contains("its observer follows") } else { false } })

        // Forced: the protocol's observer follows from the first PDU.
        config.forcedProtocol = SeamTestProtocol.id
        let forced = Self.replay(records, config).compactMap {
            if case let .emit(.measurement(m)) = $0 { m } else { nil }
        }
        #expect(forced.map(\.raw) == [[133, 88, 60]])

        // Not registered: the standard observer finds no Blood Pressure Service, so no result.
        config = CuffSessionConfiguration(address: "")
        let none = Self.replay(records, config).compactMap {
            if case let .emit(.measurement(m)) = $0 { m } else { nil }
        }
        #expect(none.isEmpty)
    }
}

/// Hands a value to another thread or closure (each is used by one thread at a time).
final class SeamUnchecked<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}
