import CuffLogging
import Foundation
import Testing
import BloodPressure
import CuffCore
import CuffRuntime
import GATT
import Transport
@testable import CuffSession

final class Box<T>: @unchecked Sendable {
    var value: T
    init(_ v: T) { value = v }
}

/// A peripheral that follows a script instead of the protocol.
func runAgainst(
    _ script: @escaping @Sendable (UnixSeqpacketBearer) -> Void, timeout: Duration = .seconds(30),
    configure: (inout CuffSessionConfiguration) -> Void = { _ in }
) throws -> (SessionOutcome, [SessionOutput], [String]) {
    // The hostile side may send records larger than our 1024-byte limit.
    var fds: [Int32] = [0, 0]
    guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds) == 0 else {
        throw TransportError(.systemCall, "socketpair")
    }
    let client = UnixSeqpacketBearer(adopting: fds[0], peerDescription: "hostile")
    let server = UnixSeqpacketBearer(adopting: fds[1], peerDescription: "test", maxPDUSize: 65536)
    let s = Box(server)
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        script(s.value)
        done.signal()
    }
    var config = CuffSessionConfiguration(address: "unix:hostile")
    config.timeout = timeout
    configure(&config)
    let outputs = Box<[SessionOutput]>([])
    let logs = LogRecorder()
    let driver = CentralDriver(
        configuration: config, hooks: SessionHooks(emit: { outputs.value.append($0) }, log: logs.logger()), signals: nil
    )
    let outcome = driver.run(client)
    _ = done.wait(timeout: .now() + 10)
    server.close()
    return (outcome, outputs.value, logs.lines)
}

func nextPDU(_ b: UnixSeqpacketBearer) -> [UInt8]? {
    while true {
        switch try? b.next(timeout: .seconds(5)) {
        case let .pdu(p)?: return p
        case .timeout?: continue
        default: return nil
        }
    }
}

@Suite("Hostile and broken peripherals", .serialized)
struct HostilePeerTests {
    @Test func silentPeerHitsTheATTTransactionTimeout() {
        // Pure: no answer to the first request within 30 s.
        var c = CuffCentral(configuration: CuffSessionConfiguration(address: "x"))
        let t0 = EventTime(monotonic: .zero, wallMicros: 0)
        let out = c.start(at: t0)
        #expect(out.contains { if case .send = $0 { true } else { false } })
        #expect(c.nextDeadline == .seconds(30))
        _ = c.tick(at: EventTime(monotonic: .seconds(29.9), wallMicros: 0))
        #expect(!c.isFinished)
        let end = c.tick(at: EventTime(monotonic: .seconds(30), wallMicros: 0))
        #expect(end.contains(.finished(.timedOut)))
    }

    @Test func wrongOpcodeAnswerIsAProtocolError() throws {
        let (outcome, outputs, _) = try runAgainst { b in
            _ = nextPDU(b)  // MTU request
            try? b.send([0x0B, 0x01, 0x02])  // a Read Response instead
            _ = nextPDU(b)
        }
        #expect(outcome == .protocolError)
        guard case let .session(end)? = outputs.last else { Issue.record("no end record"); return }
        #expect(end.outcome == .protocolError)
        #expect(end.message?.isEmpty == false)
    }

    @Test func oversizePDUEndsTheLinkCleanly() throws {
        let (outcome, _, logs) = try runAgainst { b in
            _ = nextPDU(b)
            try? b.send([0x1B, 0x06, 0x00] + [UInt8](repeating: 0xAA, count: 4000))
            _ = nextPDU(b)
        }
        #expect(outcome == .disconnected)
        #expect(!logs.isEmpty)
    }

    @Test func garbageAndUnknownHandlesNeverCrash() throws {
        let (outcome, outputs, _) = try runAgainst(
            { b in
                _ = nextPDU(b)
                try? b.send([0x03, 0x17, 0x00])  // MTU 23
                _ = nextPDU(b)  // discovery starts
                // A flood: notifications and indications for handles nobody discovered, empty and junk PDUs.
                for i in 0..<2000 {
                    try? b.send([0x1B, UInt8(i & 0xFF), 0x7F, 0x00, 0x01])
                }
                try? b.send([])
                try? b.send([0xFF, 0xFF])
                for _ in 0..<5 {
                    try? b.send([0x1D, 0x42, 0x00, 0x00])
                    _ = nextPDU(b)  // each is confirmed
                }
                b.close()
            }, timeout: .seconds(10))
        #expect([.disconnected, .protocolError].contains(outcome))
        #expect(outputs.allSatisfy { if case .measurement = $0 { false } else { true } })
    }

    @Test func peerThatClosesAtOnce() throws {
        let (outcome, outputs, _) = try runAgainst { b in b.close() }
        #expect(outcome == .disconnected)
        #expect(outputs.count == 2)  // session start and end, nothing else
    }
}
