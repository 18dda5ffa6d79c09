import Foundation
import Testing

@testable import MQTTSink

/// A libmosquitto client whose options are refused. Its initializer once destroyed the handle
/// itself and then threw, and the throw ran `deinit`, which destroyed it again: a double free
/// (valgrind: "Invalid free", invalid reads of the freed struct), after which `cuff sync` could
/// not even count its outbox ("locking protocol"). Each refusal must be a clear error, leaving
/// the process's other descriptors alone, however often it happens.
struct MosquittoClientTests {
    @Test func aRefusedClientIsDestroyedOnceAndNamesWhatWasRefused() throws {
        var url = try MQTTURL(parsing: "mqtt://127.0.0.1:1/x")
        var pipes: [(CInt, CInt)] = []
        for _ in 0..<16 {
            var fds: [CInt] = [0, 0]
            #expect(pipe(&fds) == 0)
            pipes.append((fds[0], fds[1]))
        }
        defer { for (r, w) in pipes { close(r); close(w) } }
        let longTopic = String(repeating: "t", count: 70_000)
        for round in 0..<200 {
            // By the URL parser's checks these cannot come from a command line any more; a
            // library caller can still make them.
            url.user = round % 2 == 0 ? nil : String(repeating: "u", count: 70_000)
            let will: (topic: String, payload: String)? = round % 2 == 0 ? (longTopic, "offline") : nil
            #expect {
                _ = try MosquittoClient(id: "cuff-test-\(round)", url: url, tls: nil, will: will)
            } throws: { error in
                let detail = "\(error)"
                return detail.contains(round % 2 == 0 ? "last will" : "user name")
            }
        }
        // The descriptors made before are all still open and still the same pipes.
        for (i, (r, w)) in pipes.enumerated() {
            var byte = UInt8(i)
            #expect(write(w, &byte, 1) == 1, "pipe \(i)")
            var back: UInt8 = 0xFF
            #expect(read(r, &back, 1) == 1, "pipe \(i)")
            #expect(back == UInt8(i))
        }
        // A good client is still made after all that.
        let good = try MosquittoClient(
            id: "cuff-test-good", url: try MQTTURL(parsing: "mqtt://127.0.0.1:1/x"), tls: nil,
            will: ("x/status", "offline"))
        #expect(good.socket == nil)
    }
}
