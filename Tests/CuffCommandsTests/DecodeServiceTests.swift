// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCommands
import CuffCore
import CuffSession
import Omron
import Testing

/// `cuff decode`'s work in process: one input to its JSON lines and, on failure, the message;
/// and the exit statuses the README gives for a session's outcome.
@Suite struct DecodeServiceTests {
    @Test func aMeasurementDecodes() {
        let (lines, error) = DecodeService().decode("1E 8A 00 58 00 78 00 00 00 04 11 14 29 3B 3C 00 01 27 00")
        #expect(error == nil)
        #expect(lines.count == 1)
        let json = lines.first?.serialized() ?? ""
        #expect(json.hasPrefix(#"{"type":"measurement","#))
        #expect(json.contains(#""systolic":138"#))
    }

    @Test func badHexIsAnErrorObjectAndAMessage() {
        let (lines, error) = DecodeService().decode("  zz 12\t")
        #expect(lines.count == 1)
        let json = lines.first?.serialized() ?? ""
        #expect(json.contains(#""raw":"zz 12""#))
        #expect(json.contains(#""invalid_hex""#))
        #expect(error?.contains("expected pairs of hex digits") == true)
    }

    @Test func anOmronRecordNeedsTheModelsLayout() throws {
        var s = DecodeService()
        s.omron = try #require(OmronCatalog.profile(named: "HEM-7361T"))
        let (lines, error) = s.decode("00 01")
        #expect(lines.count == 1)
        #expect(error?.hasPrefix("HEM-7361T: ") == true)
    }

    @Test func sessionOutcomesEndWithTheDocumentedStatuses() {
        let expected: [SessionOutcome: Int32] = [
            .completed: 0, .noResult: 2, .stopped: 3, .disconnected: 4, .timedOut: 5, .securityRefused: 6,
            .serviceMissing: 7, .protocolError: 8, .connectionFailed: 9, .keyRefused: 12, .notInPairingMode: 13,
            .keyLatched: 14,
        ]
        for o in SessionOutcome.allCases {
            #expect(o.exitStatus.code == expected[o], "\(o)")
            #expect(o.exitCode == o.exitStatus.code)
        }
        #expect(ExitStatus.sinkFailed.code == 10 && ExitStatus.readerGone.code == 141 && ExitStatus.usage.code == 64)
    }
}
