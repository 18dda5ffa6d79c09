// SPDX-License-Identifier: GPL-2.0-or-later

import CuffTesting
import CuffTestSupport
import Foundation
import Testing

/// The repository's `captures/` folder.
let capturesDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("captures")

/// The lines of a committed `.ndjson` file (`captures/NAME.ndjson`).
func committedLines(_ name: String) throws -> [String] {
    try String(contentsOf: capturesDirectory.appendingPathComponent(name + ".ndjson"), encoding: .utf8)
        .split(separator: "\n").map(String.init)
}

/// Every committed capture that has the NDJSON `cuff replay` printed for it beside it, as a path
/// relative to `captures/` without the extension.
func capturesWithExpectedOutput() -> [String] {
    let fm = FileManager.default
    var names: [String] = []
    for dir in ["", "foreign/"] {
        let files = (try? fm.contentsOfDirectory(atPath: capturesDirectory.appendingPathComponent(dir).path)) ?? []
        for f in files where f.hasSuffix(".btsnoop") {
            let name = dir + String(f.dropLast(".btsnoop".count))
            if fm.fileExists(atPath: capturesDirectory.appendingPathComponent(name + ".ndjson").path) {
                names.append(name)
            }
        }
    }
    return names.sorted()
}

@Suite("CuffTesting: replay a capture")
struct ReplayEntryPointTests {
    @Test func everyScenarioAndTheForeignCaptureAreThere() {
        let names = capturesWithExpectedOutput()
        #expect(names.count >= 17)
        #expect(names.contains("foreign/bluetoothd-gatt-server"))
    }

    /// The committed `.ndjson` is what `cuff replay FILE --quiet` printed (CLITests check the CLI
    /// prints those bytes): the entry point gives the same lines, in order.
    @Test(arguments: capturesWithExpectedOutput())
    func givesTheLinesCuffReplayPrints(_ name: String) throws {
        let expected = try committedLines(name)
        let replayed = try CuffReplay.replay(path: capturesDirectory.appendingPathComponent(name + ".btsnoop").path)
        #expect(replayed.ndjsonLines == expected)
        #expect(replayed.fault == nil)
        #expect(replayed.warnings.isEmpty)
        #expect(replayed.unmapped.isEmpty)
        #expect(replayed.sessions >= 1)
    }

    /// The typed records say what their lines say.
    @Test func typedMeasurementsMatchTheirLines() throws {
        let replayed = try CuffReplay.replay(path: capturesDirectory.appendingPathComponent("multi-user.btsnoop").path)
        let measurementLines = replayed.records.filter { $0.measurement != nil }.map(\.ndjson)
        #expect(!measurementLines.isEmpty)
        let typed = replayed.ndjsonLines.filter { $0.hasPrefix("{\"type\":\"measurement\"") }
        #expect(measurementLines.count == typed.count)
        for (m, line) in zip(replayed.measurements, measurementLines) {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(object["systolic"] as? Double == m.systolic.doubleValue)
            #expect(object["diastolic"] as? Double == m.diastolic.doubleValue)
            #expect(object["user_id"] as? Int == m.userID.map(Int.init))
            #expect(object["raw"] as? String == Hex.encode(m.raw))
        }
    }

    @Test func bytesInMemoryGiveTheSameRecordsAsTheFile() throws {
        let url = capturesDirectory.appendingPathComponent("stored-records-bps-1.1.btsnoop")
        let fromFile = try CuffReplay.replay(path: url.path)
        let fromBytes = try CuffReplay.replay(bytes: [UInt8](try Data(contentsOf: url)))
        #expect(fromBytes.records == fromFile.records)
        #expect(fromFile.measurements.count > 1)
    }

    /// Wireshark's `editcap` rewrites the btsnoop file as pcap and pcapng (LINKTYPE 254): each
    /// replays to the lines `cuff replay` printed for the original; the format comes from the
    /// first bytes, or from the options.
    @Test(
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/editcap")), arguments: ["pcap", "pcapng"])
    func pcapAndPcapngOfTheSameSessionGiveTheSameLines(_ format: String) throws {
        let original = capturesDirectory.appendingPathComponent("normal.btsnoop").path
        let converted = temporaryPath("normal.\(format)")
        defer { unlink(converted) }
        let editcap = try runToCompletion("/usr/bin/editcap", ["-F", format, original, converted])
        #expect(editcap.status == 0)
        let expected = try committedLines("normal")
        #expect(try CuffReplay.replay(path: converted).ndjsonLines == expected)
        let forced = CuffReplay.Options(format: format == "pcap" ? .pcap : .pcapng)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: converted)))
        #expect(try CuffReplay.replay(bytes: bytes, options: forced).ndjsonLines == expected)
    }

    @Test func somethingThatIsNoCaptureIsRefusedWithACode() throws {
        let text = Array("not a capture at all".utf8)
        let error = #expect(throws: CaptureError.self) { try CuffReplay.replay(bytes: text) }
        #expect(error?.code == .badMagic)
        let missing = #expect(throws: CaptureError.self) { try CuffReplay.replay(path: "/nonexistent/cuff.btsnoop") }
        #expect(missing?.code == .ioError)
    }

    /// A capture cut inside a record: the records before the cut, and the fault.
    @Test func aCutCaptureKeepsTheRecordsBeforeTheFault() throws {
        let bytes = [UInt8](try Data(contentsOf: capturesDirectory.appendingPathComponent("normal.btsnoop")))
        let whole = try CuffReplay.replay(bytes: bytes)
        let cut = try CuffReplay.replay(bytes: Array(bytes.prefix(bytes.count - 3)))
        #expect(cut.fault != nil)
        #expect(cut.records.count >= 1)
        #expect(cut.records.count <= whole.records.count)
        // The progress records before the cut are the whole capture's.
        let progress = cut.records.prefix { if case .progress = $0.output { true } else { false } }
        #expect(Array(progress) == Array(whole.records.prefix(progress.count)))
    }
}
