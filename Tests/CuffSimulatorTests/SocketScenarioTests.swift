import CuffLogging
import Foundation
import Testing
import BloodPressure
import CuffCore
import CuffRuntime
import CuffSession
import CuffSimulator
import GATT
import Transport

/// Lets a test hand a driver to another thread (each is used by one thread only).
final class Unchecked<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// The simulated cuff and a session talking ATT through a real `socketpair(AF_UNIX, SOCK_SEQPACKET)`.
struct SocketRun {
    var outputs: [SessionOutput] = []
    var logs: [String] = []
    var simulatorLogs: [String] = []
    var outcome: SessionOutcome = .noResult
    var exitCode: Int32 = -1
    var serverEnd: PeripheralEnd?

    var measurements: [MeasurementRecord] { outputs.compactMap { if case let .measurement(m) = $0 { m } else { nil } } }
    var progress: [ProgressRecord] { outputs.compactMap { if case let .progress(p) = $0 { p } else { nil } } }
    var sessions: [SessionRecord] { outputs.compactMap { if case let .session(s) = $0 { s } else { nil } } }

    static func run(
        _ scenario: Scenario, persona: Persona = .bps10, start: Bool = false, stopAfter: Duration? = nil,
        speed: Double = 400
    ) throws -> SocketRun {
        var sim = SimulatorConfiguration(scenario: scenario, persona: persona, seed: 7, autostart: !start)
        sim.linger = .seconds(1)
        let simLogs = LogRecorder()
        let driver = PeripheralDriver(
            peripheral: CuffPeripheral(configuration: sim), clock: SimulationClock(speed: speed), signals: nil,
            log: simLogs.logger())
        return try run(driver: driver, logs: simLogs, start: start, stopAfter: stopAfter)
    }

    /// One session against `driver` (a simulated cuff that may have served clients before).
    static func run(
        driver d: PeripheralDriver<CuffPeripheral>, logs simLogs: LogRecorder, start: Bool = false,
        stopAfter: Duration? = nil,
        gattCache: GATTCacheStore? = nil
    ) throws -> SocketRun {
        let (clientEnd, serverEnd) = try UnixSeqpacketBearer.pair()
        let driver = Unchecked(d)
        let server = Unchecked(serverEnd)
        let done = DispatchSemaphore(value: 0)
        let endBox = Unchecked(LogBox())
        Thread.detachNewThread {
            let end = driver.value.serve(server.value)
            endBox.value.append("\(end)")
            done.signal()
        }
        var result = SocketRun()
        var config = CuffSessionConfiguration(address: "unix:socketpair")
        config.settle = .milliseconds(200)
        config.timeout = .seconds(60)
        config.sendStart = start
        let out = LogRecorder()
        let collected = OutputBox()
        let hooks = SessionHooks(emit: { collected.items.append($0) }, log: out.logger())
        let central = CentralDriver(
            configuration: config, hooks: hooks, signals: nil, stopAfter: stopAfter, gattCache: gattCache)
        result.outcome = central.run(clientEnd)
        result.exitCode = central.central.exitCode
        #expect(done.wait(timeout: .now() + 20) == .success, "the simulator did not end after the client closed")
        result.outputs = collected.items
        result.logs = out.lines
        result.simulatorLogs = simLogs.lines
        return result
    }
}

final class LogBox: @unchecked Sendable {
    private let lock = NSLock()
    private var _lines: [String] = []
    func append(_ s: String) { lock.lock(); _lines.append(s); lock.unlock() }
    var lines: [String] { lock.lock(); defer { lock.unlock() }; return _lines }
}

final class OutputBox { var items: [SessionOutput] = [] }

@Suite("Simulator ↔ session over a real socketpair", .serialized)
struct SocketScenarioTests {
    static let liveScenarios: [Scenario] = Scenario.allCases.filter { $0 != .disconnect }

    @Test(arguments: liveScenarios, [Persona.bps10, .bps11])
    func everyScenarioEndToEnd(scenario: Scenario, persona: Persona) throws {
        let r = try SocketRun.run(scenario, persona: persona)
        #expect(r.outcome == .completed, "\(r.logs.suffix(5))")
        #expect(r.exitCode == 0)
        // Discovery and configuration really happened over the socket.
        let start = try #require(r.sessions.first)
        #expect(start.event == .start)
        let end = try #require(r.sessions.last)
        #expect(end.event == .end && end.outcome == .completed)
        #expect(end.device.manufacturer == (scenario == .beurerBM85 ? "Beurer GmbH" : "cuff project"))
        #expect(end.device.features?.contains(.bodyMovementDetection) == true)
        // Progress: a real inflation then deflation, several notifications per second.
        let p = r.progress
        #expect(p.count > 150)  // 5 per simulated second over ~35 s; a late driver catches up
        let peak = p.compactMap { $0.cuffPressure.doubleValue }.max() ?? 0
        let peakMmHg = scenario == .kpa ? peak * PressureUnit.mmHgPerKPa : peak
        #expect(peakMmHg > 110 && peakMmHg < 220)
        #expect(p.first?.phase == .inflating && p.last?.phase == .deflating)
        // One live result, after the progress, and stored ones before it for the upload scenarios.
        let live = r.measurements.filter { !$0.stored }
        #expect(live.count == 1)
        let stored = r.measurements.filter(\.stored)
        switch scenario {
        case .storedRecords: #expect(stored.count == 3)
        case .slowConfirm: #expect(stored.count == 5)
        case .multiUser: #expect(stored.count == 1 && stored[0].userID == 1 && live[0].userID == 2)
        default: #expect(stored.isEmpty)
        }
        if persona == .bps11 && !stored.isEmpty {
            #expect(stored.allSatisfy { $0.sequenceNumber != nil && $0.characteristic == .bloodPressureRecord })
        }
        let m = live[0]
        switch scenario {
        case .error:
            #expect(m.systolic == .nan && m.diastolic == .nan && m.meanArterialPressure == .nan && m.pulseRate == .nan)
            #expect(m.status?.rawValue == 0)
            #expect(m.json.serialized().contains("\"systolic\":\"NaN\""))
        case .kpa:
            #expect(m.unit == .kPa)
            #expect((14...18).contains(m.systolic.doubleValue ?? 0))
        case .hypertensive:
            #expect((m.systolic.doubleValue ?? 0) >= 155 && m.status?.pulseRateRange == .aboveUpperLimit)
        case .hypotensive:
            #expect((m.systolic.doubleValue ?? 200) <= 95 && m.status?.pulseRateRange == .belowLowerLimit)
        case .irregularPulse: #expect(m.status?.irregularPulse == true)
        case .bodyMovement: #expect(m.status?.bodyMovement == true)
        case .cuffLoose: #expect(m.status?.cuffTooLoose == true)
        case .improperPosition: #expect(m.status?.improperPosition == true)
        case .beurerBM85:
            // The quirk profile was chosen from the model number read over DIS.
            #expect(m.userID == 1)
            #expect((60...90).contains(m.pulseRate?.doubleValue ?? 0))
            #expect(m.warnings.contains { $0.code == .quirkApplied })
        case .rfuBits:
            #expect(m.warnings.contains { $0.code == .rfuFlags } && m.warnings.contains { $0.code == .rfuStatus })
        default:
            #expect((110...130).contains(m.systolic.doubleValue ?? 0))
            #expect((70...90).contains(m.diastolic.doubleValue ?? 0))
            #expect(m.status?.rawValue == 0)
        }
        if scenario != .error {
            // The cuff's clock was set by the session, so the time stamp is today's.
            #expect(
                m.timestamp?.hasPrefix(String(EventTime.iso8601(wallMicros: WallClock.system.nowMicros()).prefix(8)))
                    == true)
        }
    }

    /// Two clients, one after the other, of one simulated cuff (as `cuff simulate --listen` serves
    /// them): what the first confirmed is not sent to the second as stored readings.
    @Test(arguments: [Scenario.storedRecords, .slowConfirm, .multiUser, .normal])
    func confirmedReadingsAreNotSentToTheNextConnection(scenario: Scenario) throws {
        var sim = SimulatorConfiguration(scenario: scenario, seed: 7, autostart: true)
        sim.linger = .seconds(1)
        let logs = LogRecorder()
        let driver = PeripheralDriver(
            peripheral: CuffPeripheral(configuration: sim), clock: SimulationClock(speed: 400), signals: nil,
            log: logs.logger())
        let first = try SocketRun.run(driver: driver, logs: logs)
        #expect(first.outcome == .completed)
        let seeded = [Scenario.storedRecords: 3, .slowConfirm: 5, .multiUser: 1][scenario] ?? 0
        #expect(first.measurements.filter(\.stored).count == seeded)
        #expect(first.measurements.filter { !$0.stored }.count == 1)
        let second = try SocketRun.run(driver: driver, logs: logs)
        #expect(second.outcome == .completed)
        // Only the second connection's own live result: nothing stored again.
        #expect(second.measurements.filter(\.stored).isEmpty, "\(second.measurements.map(\.timestamp))")
        #expect(second.measurements.filter { !$0.stored }.count == 1)
        #expect(logs.lines.filter { $0.hasPrefix("sending ") }.count == (seeded > 0 ? 1 : 0))
    }

    /// bps-1.1 stored records in segments of 8 bytes reach the session as the same records.
    @Test func segmentedRecordsAreReassembled() throws {
        func run(segment: Int?) throws -> SocketRun {
            var sim = SimulatorConfiguration(scenario: .storedRecords, persona: .bps11, seed: 7, autostart: true)
            sim.linger = .seconds(1)
            sim.recordSegmentLength = segment
            let logs = LogRecorder()
            let driver = PeripheralDriver(
                peripheral: CuffPeripheral(configuration: sim), clock: SimulationClock(speed: 400), signals: nil,
                log: logs.logger())
            return try SocketRun.run(driver: driver, logs: logs)
        }
        let whole = try run(segment: nil)
        let split = try run(segment: 8)
        #expect(split.outcome == .completed)
        let a = whole.measurements.filter(\.stored), b = split.measurements.filter(\.stored)
        #expect(b.count == 3)
        #expect(b.map(\.sequenceNumber) == [0, 1, 2])
        #expect(b.map(\.raw) == a.map(\.raw))
        #expect(b.allSatisfy { $0.characteristic == .bloodPressureRecord })
        #expect(!split.logs.contains { $0.contains("warning") || $0.contains("malformed") }, "\(split.logs)")
    }

    @Test func disconnectMidMeasurement() throws {
        let r = try SocketRun.run(.disconnect)
        #expect(r.outcome == .disconnected)
        #expect(r.exitCode == SessionOutcome.disconnected.exitCode)
        #expect(r.measurements.isEmpty)
        #expect(r.progress.count > 80)
        #expect(r.progress.last?.phase == .deflating)
        #expect(r.sessions.last?.message?.contains("in the middle of a measurement") == true)
    }

    @Test func startCommandThenStop() throws {
        // No autostart: the session writes start to the control point, then stops the cuff mid-way.
        let r = try SocketRun.run(.normal, start: true, stopAfter: .milliseconds(150), speed: 100)
        #expect(r.outcome == .stopped)
        #expect(r.exitCode == SessionOutcome.stopped.exitCode)
        #expect(r.measurements.isEmpty)
        #expect(r.simulatorLogs.contains { $0.contains("start command") })
        #expect(r.simulatorLogs.contains { $0.contains("stop command") })
    }

    @Test func noStartNoButtonTimesOut() throws {
        let (clientEnd, serverEnd) = try UnixSeqpacketBearer.pair()
        let driver = Unchecked(
            PeripheralDriver(
                peripheral: CuffPeripheral(configuration: SimulatorConfiguration(scenario: .normal)),
                clock: SimulationClock(speed: 1),
                signals: nil, log: .silent))
        let server = Unchecked(serverEnd)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = driver.value.serve(server.value); done.signal()
        }
        var config = CuffSessionConfiguration(address: "unix:socketpair")
        config.timeout = .milliseconds(400)
        let collected = OutputBox()
        let central = CentralDriver(
            configuration: config, hooks: SessionHooks(emit: { collected.items.append($0) }, log: .silent), signals: nil
        )
        #expect(central.run(clientEnd) == .timedOut)
        #expect(central.central.exitCode == SessionOutcome.timedOut.exitCode)
        #expect(done.wait(timeout: .now() + 10) == .success)
    }
}
