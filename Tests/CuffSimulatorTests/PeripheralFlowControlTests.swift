import CuffCore
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
