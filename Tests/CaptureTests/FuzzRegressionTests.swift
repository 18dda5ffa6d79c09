// SPDX-License-Identifier: GPL-2.0-or-later
import Capture
import CuffCore
import Foundation
import Testing

/// Inputs the FuzzCapture libFuzzer target (tools/fuzz) crashed on, replayed as that target does:
/// byte 0 picks the capture format, the rest is the file. Each trapped on timestamp arithmetic (an
/// event time before 1970, a deadline near Int64.max, `elapsed` across 292 years); now each
/// replays to an end.
@Suite struct FuzzRegressionTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("tools/fuzz/corpus/FuzzCapture")

    static var crashInputs: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: corpus.path)) ?? []).filter { $0.hasPrefix("crash-") }
            .sorted()
    }

    @Test func theCrashInputsAreThere() {
        #expect(Self.crashInputs.count >= 3)
    }

    @Test(arguments: crashInputs)
    func replaysWithoutATrap(name: String) throws {
        let data = [UInt8](try Data(contentsOf: Self.corpus.appendingPathComponent(name)))
        try #require(!data.isEmpty)
        let format = CaptureFormat.allCases[Int(data[0]) % CaptureFormat.allCases.count]
        var reader = CaptureReader(source: ArrayByteSource(Array(data.dropFirst())), format: format, chunkSize: 4096)
        try reader.readHeader()
        var replay = CaptureReplay()
        var out: [CaptureReplay.Output] = []
        var records = 0
        let ending = replay.replay(&reader, into: &out, batch: 64) { out in
            records += out.count
            out.removeAll(keepingCapacity: true)
            return true
        }
        switch ending {
        case .end, .stopped: replay.finish(into: &out)
        case let .fault(e): replay.finish(after: e, into: &out)
        }
        records += out.count
        // The replay ran to its end (a trap would kill the test process) and said something about
        // the input: a session's records, a log line or a warning.
        #expect(records >= 1)
    }
}
