import CuffCore
import Foundation
import CuffLogging
import GATT
import Testing
import Transport

@testable import CuffRuntime

/// A peripheral that sends `count` notifications of `size` bytes as soon as a client connects,
/// numbered, then drops the link (a cuff that sends its buffer and switches off).
struct BurstPeripheral: GATTPeripheral {
    var count: Int
    var size: Int
    var nextDeadline: Timestamp? { nil }
    var database: AttributeDatabase { AttributeDatabase.Builder().build() }

    static func pdu(_ i: Int, size: Int) -> [UInt8] {
        [0x1B, 0x03, 0x00, UInt8(i & 0xFF), UInt8(i >> 8)] + [UInt8](repeating: 0x5A, count: size - 5)
    }

    mutating func connected(now: Timestamp, client: String?, into out: inout [PeripheralOutput]) {
        for i in 0..<count { out.append(.send(Self.pdu(i, size: size))) }
        out.append(.disconnect("buffer sent"))
    }
    mutating func disconnected(now: Timestamp, into out: inout [PeripheralOutput]) {}
    mutating func linkSecurityChanged(_ level: SecurityLevel) {}
    mutating func receive(_ pdu: [UInt8], now: Timestamp, into out: inout [PeripheralOutput]) {}
    mutating func buttonPressed(now: Timestamp, into out: inout [PeripheralOutput]) {}
    mutating func tick(now: Timestamp, into out: inout [PeripheralOutput]) {}
}

@Suite("The peripheral driver never waits in a send")
struct PeripheralFlowControlTests {
    /// More PDUs than the client's socket holds, then the cuff drops the link: the rest wait
    /// without blocking the loop, go out in order as the client reads, and the link is dropped
    /// only after the last (a cuff's radio sends what it queued before it disconnects).
    @Test func whatWaitsGoesOutInOrderBeforeTheCuffDropsTheLink() throws {
        let count = 300
        let loop = try EventLoop()
        let driver = PeripheralDriver(
            peripheral: BurstPeripheral(count: count, size: 1000), clock: SimulationClock(speed: 1), signals: nil,
            log: .silent)
        driver.attach(to: loop)
        let (client, server) = try UnixSeqpacketBearer.pair()
        defer { client.close() }
        var ended: PeripheralEnd?
        driver.accept(server) { ended = $0 }
        // The socket took only part of the burst; the rest waits, and so does the disconnect.
        #expect(driver.isStalled && ended == nil, "the burst fit in the socket: the test shows nothing")
        var got: [Int] = []
        var closed = false
        // The client reads a few PDUs every millisecond, on the same loop.
        func read() {
            for _ in 0..<4 {
                guard let e = try? client.receiveNow() else { break }
                switch e {
                case let .pdu(p): got.append(Int(p[3]) | Int(p[4]) << 8)
                case .closed: closed = true
                case .timeout: break
                }
            }
            if !closed { loop.schedule(at: MonotonicClock.now() + .milliseconds(1)) { read() } }
        }
        read()
        let deadline = MonotonicClock.now() + .seconds(20)
        try loop.run { closed || MonotonicClock.now() > deadline }
        #expect(got == Array(0..<count))
        #expect(ended == .disconnected("buffer sent"), "\(String(describing: ended))")
    }
}

/// A peripheral that sends nothing of its own and answers every PDU with an Exchange MTU Response.
struct AnsweringPeripheral: GATTPeripheral {
    var nextDeadline: Timestamp? { nil }
    var database: AttributeDatabase { AttributeDatabase.Builder().build() }
    static let answer: [UInt8] = [0x03, 0x17, 0x00]
    mutating func connected(now: Timestamp, client: String?, into out: inout [PeripheralOutput]) {}
    mutating func disconnected(now: Timestamp, into out: inout [PeripheralOutput]) {}
    mutating func linkSecurityChanged(_ level: SecurityLevel) {}
    mutating func receive(_ pdu: [UInt8], now: Timestamp, into out: inout [PeripheralOutput]) {
        out.append(.send(Self.answer))
    }
    mutating func buttonPressed(now: Timestamp, into out: inout [PeripheralOutput]) {}
    mutating func tick(now: Timestamp, into out: inout [PeripheralOutput]) {}
}

@Suite("A client that sends nothing does not hold the cuff")
struct SilentClientTests {
    /// Probe R: a client that connected and sent nothing held the cuff for good; the next one
    /// waited in the listen queue, and `cuff measure` behind it timed out. The silent one is
    /// dropped after the limit, and the next is served; one that spoke is never dropped for
    /// being quiet afterwards (it waits for a measurement).
    @Test func theSilentClientIsDroppedAndTheNextServed() throws {
        let loop = try EventLoop()
        let logs = LogRecorder()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("silent-\(getpid()).sock").path
        defer { unlink(path) }
        let driver = PeripheralDriver(
            peripheral: AnsweringPeripheral(), clock: SimulationClock(speed: 1), signals: nil, log: logs.logger())
        let cuff = ListeningPeripheral(
            driver: driver, listener: try UnixSeqpacketListener(path: path), loop: loop, log: logs.logger(),
            silentClientTimeout: .milliseconds(300))
        try cuff.start()
        defer { cuff.stop() }
        let silent = try UnixSeqpacketBearer.connect(path: path)
        defer { silent.close() }
        let next = try UnixSeqpacketBearer.connect(path: path)
        defer { next.close() }
        try next.send([0x02, 0x17, 0x00])  // waits in its socket until the cuff takes it
        var silentClosed = false
        var answered = false
        func poll() {
            if case .closed? = try? silent.receiveNow() { silentClosed = true }
            if case .pdu(let p)? = try? next.receiveNow() { answered = p == AnsweringPeripheral.answer }
            if !answered { loop.schedule(at: MonotonicClock.now() + .milliseconds(5)) { poll() } }
        }
        poll()
        let deadline = MonotonicClock.now() + .seconds(20)
        try loop.run { answered || MonotonicClock.now() > deadline }
        #expect(silentClosed)
        #expect(answered)
        #expect(
            logs.lines.contains { $0.contains("session 1 ended") && $0.contains("the client sent nothing for") },
            "\(logs.lines)")
        // The client that spoke stays connected through several limits of silence.
        let quietUntil = MonotonicClock.now() + .milliseconds(1000)
        try loop.run { MonotonicClock.now() > quietUntil }
        #expect(driver.isConnected)
        #expect(!logs.lines.contains { $0.contains("session 2 ended") })
    }
}
