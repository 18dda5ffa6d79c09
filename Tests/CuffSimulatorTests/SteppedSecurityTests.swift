import CuffLogging
import Testing
import BloodPressure
import CuffCore
import CuffRuntime
import CuffSession
import CuffSimulator
import Transport

/// The link's security as both ends of a socketpair see it (one thread: the loop's).
final class SharedSecurity {
    var level: SecurityLevel = .low
}

/// The cuff's end: a socketpair end whose security is the shared one.
final class SecuredServerEnd: PollableBearer {
    let inner: UnixSeqpacketBearer
    let shared: SharedSecurity
    init(_ inner: UnixSeqpacketBearer, _ shared: SharedSecurity) { self.inner = inner; self.shared = shared }
    var peerDescription: String { inner.peerDescription }
    var fileDescriptor: CInt? { inner.fileDescriptor }
    func receiveNow() throws(TransportError) -> BearerEvent? { try inner.receiveNow() }
    func send(_ pdu: [UInt8]) throws(TransportError) { try inner.send(pdu) }
    func next(timeout: Duration?) throws(TransportError) -> BearerEvent { try inner.next(timeout: timeout) }
    func raiseSecurity(to level: SecurityLevel) throws(TransportError) {}
    var securityLevel: SecurityLevel { shared.level }
    func close() { inner.close() }
}

/// The session's end: raising security in steps as the L2CAP bearer does: "not ready" a few
/// times (the kernel's SMP channel not there yet), then pending until the descriptor is writable.
final class SteppedClientEnd: SteppedSecurityBearer {
    let inner: UnixSeqpacketBearer
    let shared: SharedSecurity
    var notReadyLeft: Int
    let refuse: Bool
    var begins: [Timestamp] = []
    var finishes = 0
    init(_ inner: UnixSeqpacketBearer, _ shared: SharedSecurity, notReady: Int, refuse: Bool) {
        self.inner = inner
        self.shared = shared
        notReadyLeft = notReady
        self.refuse = refuse
    }
    var peerDescription: String { inner.peerDescription }
    var fileDescriptor: CInt? { inner.fileDescriptor }
    func receiveNow() throws(TransportError) -> BearerEvent? { try inner.receiveNow() }
    func send(_ pdu: [UInt8]) throws(TransportError) { try inner.send(pdu) }
    func next(timeout: Duration?) throws(TransportError) -> BearerEvent { try inner.next(timeout: timeout) }
    func raiseSecurity(to level: SecurityLevel) throws(TransportError) { Issue.record("the blocking raise was used") }
    var securityLevel: SecurityLevel { shared.level }
    func close() { inner.close() }
    var securityTimeout: Duration { .seconds(5) }
    func beginRaisingSecurity(to level: SecurityLevel, lastTry: Bool) throws(TransportError) -> SecurityProgress {
        begins.append(MonotonicClock.now())
        if shared.level >= level { return .done }
        if notReadyLeft > 0 {
            notReadyLeft -= 1
            return .notReady
        }
        return .pending
    }
    func finishRaisingSecurity(to level: SecurityLevel, timedOut: Bool) throws(TransportError) {
        finishes += 1
        if refuse { throw TransportError(.securityRefused, "pairing rejected (scripted)") }
        shared.level = level
    }
}

/// `cuff measure` / `cuff watch` on one event loop: a cuff that needs an encrypted link makes the
/// session raise security, and the loop goes on meanwhile (other cuffs, timers).
@Suite("Security raised in steps on the event loop")
struct SteppedSecurityTests {
    struct Run {
        var outcome: SessionOutcome
        var measurements: Int
        var begins: Int
        var finishes: Int
        var ticksDuringRaise: Int
    }

    func run(refuse: Bool) throws -> Run {
        var sim = SimulatorConfiguration(scenario: .normal, seed: 7, autostart: true)
        sim.linger = .seconds(1)
        let shared = SharedSecurity()
        let loop = try EventLoop()
        let driver = PeripheralDriver(
            peripheral: CuffPeripheral(configuration: sim, requireEncryption: true),
            clock: SimulationClock(speed: 400), signals: nil, log: .silent)
        driver.attach(to: loop)
        let (c, s) = try UnixSeqpacketBearer.pair()
        var serverEnded = false
        driver.accept(SecuredServerEnd(s, shared)) { _ in serverEnded = true }
        let client = SteppedClientEnd(c, shared, notReady: 3, refuse: refuse)
        var config = CuffSessionConfiguration(address: "unix:socketpair")
        config.settle = .milliseconds(200)
        config.timeout = .seconds(30)
        var measurements = 0
        let hooks = SessionHooks(emit: { if case .measurement = $0 { measurements += 1 } }, log: .silent)
        let connection = CentralConnection(configuration: config, bearer: client, loop: loop, hooks: hooks)
        // A timer every 10 ms: it must keep running while the raise waits.
        var ticks: [Timestamp] = []
        func tick() {
            ticks.append(MonotonicClock.now())
            if !connection.isFinished { loop.schedule(at: MonotonicClock.now() + .milliseconds(10)) { tick() } }
        }
        tick()
        connection.start()
        let deadline = MonotonicClock.now() + .seconds(30)
        try loop.run { (connection.isFinished && (serverEnded || refuse)) || MonotonicClock.now() > deadline }
        let first = client.begins.first ?? .zero, last = client.begins.last ?? .zero
        return Run(
            outcome: connection.outcome, measurements: measurements, begins: client.begins.count,
            finishes: client.finishes,
            ticksDuringRaise: ticks.filter { $0 > first && $0 < last }.count)
    }

    @Test func aCuffThatNeedsEncryptionGetsItWithoutBlockingTheLoop() throws {
        let r = try run(refuse: false)
        #expect(r.outcome == .completed)
        #expect(r.measurements == 1)
        #expect(r.begins >= 4)  // three "not ready", then pending
        #expect(r.finishes == 1)
        // Three retries 50 ms apart: the 10 ms timer ran in between.
        #expect(r.ticksDuringRaise >= 5, "\(r.ticksDuringRaise) ticks while the raise waited")
    }

    @Test func aRefusedPairingEndsTheSession() throws {
        let r = try run(refuse: true)
        #expect(r.outcome == .securityRefused)
        #expect(r.measurements == 0)
        #expect(r.finishes == 1)
    }
}
