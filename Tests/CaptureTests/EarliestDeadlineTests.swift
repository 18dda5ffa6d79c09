// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffSession
import Foundation
import Testing
@testable import Capture

/// A replay hands the PDU of a record it takes whole to its session without the session's own
/// deadline check (`deadlinesDone`): that is right only while its cached earliest deadline is
/// exactly the earliest of its open sessions' after every record, which this checks.
@Suite("Replay earliest deadline")
struct EarliestDeadlineTests {
    static func check(_ bytes: [UInt8], _ configuration: CuffSessionConfiguration, _ name: String) -> Int {
        var reader = CaptureReader(source: ArrayByteSource(bytes), chunkSize: 4096)
        var record = HCIRecord(timestamp: .zero, direction: .received, kind: .other(0), payload: [])
        var replay = CaptureReplay(configuration: configuration)
        var out: [CaptureReplay.Output] = []
        var checked = 0
        while (try? reader.next(into: &record)) == true {
            replay.consume(record, into: &out)
            var exact: Timestamp?
            for c in replay.connections.values {
                if let d = c.deadline, exact == nil || d < exact! { exact = d }
            }
            #expect(replay.earliest == exact, "\(name): record \(checked)")
            checked += 1
        }
        return checked
    }

    /// Every committed capture (whole and cut short), with the default windows and with windows
    /// short enough that deadlines fall between most PDUs.
    @Test func earliestIsExactAfterEveryRecord() throws {
        var short = CuffSessionConfiguration(address: "")
        short.timeout = .milliseconds(700)
        short.settle = .milliseconds(3)
        short.storedBurstWindow = .milliseconds(2)
        short.observerStepWindow = .milliseconds(1)
        var checked = 0
        for name in committedCaptures() {
            let bytes = Array(try Data(contentsOf: capturesDirectory.appendingPathComponent(name + ".btsnoop")))
            for configuration in [CuffSessionConfiguration(address: ""), short] {
                checked += Self.check(bytes, configuration, name)
                checked += Self.check(Array(bytes.prefix(bytes.count * 3 / 5)), configuration, name + " (cut)")
            }
        }
        #expect(checked > 1000)
    }
}
