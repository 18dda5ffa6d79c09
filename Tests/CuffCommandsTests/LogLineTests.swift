// SPDX-License-Identifier: GPL-2.0-or-later
@testable import CuffLogging
import Logging
import Testing

/// cuff's stderr lines through swift-log: `LABEL: SCOPE: message`, and the levels `--quiet` keeps.
@Suite struct LogLineTests {
    @Test func aLineIsTheLabelThenEachScopeThenTheMessage() {
        #expect(LogLine.text(label: "cuff watch", metadata: [:], message: "stopped") == "cuff watch: stopped")
        #expect(LogLine.text(label: "", metadata: [:], message: "stopped") == "stopped")
        let recorder = LogRecorder()
        let log = recorder.logger().scoped("cuff-0001").scoped("pairing agent")
        log.info("session 1: client connected")
        #expect(log[metadataKey: "scope"] == "cuff-0001: pairing agent")
        #expect(recorder.lines == ["cuff-0001: pairing agent: session 1: client connected"])
    }

    @Test func aQuietLoggerKeepsWhatIsAboveTheEvents() {
        let recorder = LogRecorder()
        let quiet = recorder.logger(level: .notice)
        quiet.debug("a session's own line")
        quiet.info("an event")
        quiet.error("the store fails")
        quiet.notice("the store keeps readings again")
        #expect(recorder.lines == ["the store fails", "the store keeps readings again"])
        Logger.silent.error("never seen")
        #expect(recorder.lines.count == 2)
    }
}
