import Foundation
import Testing

/// `cuff measure ADDRESS --adapter hciN --capture FILE` records hciN's index, not 0. Without
/// Bluetooth hardware the connection fails, but the capture already names its controller: New
/// Index, Open Index and Index Info for hciN come first, as btmon logs a controller when it starts.
@Suite("cuff measure --capture: the adapter index")
struct MeasureCaptureAdapterTests {
    /// (adapter index, monitor opcode, payload) of each record of a btsnoop 2001 file.
    static func records(_ b: [UInt8]) -> [(index: Int, opcode: Int, payload: [UInt8])] {
        var out: [(Int, Int, [UInt8])] = []
        var at = 16
        while at + 24 <= b.count {
            let included = Int(b[at + 4]) << 24 | Int(b[at + 5]) << 16 | Int(b[at + 6]) << 8 | Int(b[at + 7])
            guard at + 24 + included <= b.count else { break }
            out.append(
                (
                    Int(b[at + 8]) << 8 | Int(b[at + 9]), Int(b[at + 10]) << 8 | Int(b[at + 11]),
                    Array(b[(at + 24)..<(at + 24 + included)])
                ))
            at += 24 + included
        }
        return out
    }

    @Test(arguments: [("hci1", 1), ("hci7", 7), ("2", 2)])
    func theCaptureNamesTheControllerOfTheSession(adapter: String, index: Int) throws {
        let file = ReplayCommandTests.tempFile("measure-\(adapter).btsnoop")
        defer { try? FileManager.default.removeItem(at: file) }
        let r = try CLI.run(
            [
                "measure", "00:AA:01:00:00:00", "--adapter", adapter, "--capture", file.path, "--timeout", "2",
                "--quiet",
            ], timeout: 60)
        #expect(r.status != 0)  // no cuff here (no Bluetooth in a build container)
        let bytes = [UInt8](try Data(contentsOf: file))
        #expect(bytes.prefix(16).elementsEqual(Array("btsnoop".utf8) + [0, 0, 0, 0, 1, 0, 0, 0x07, 0xD1]))
        let recs = Self.records(bytes)
        #expect(recs.map(\.opcode).prefix(3) == [0, 8, 10])  // New Index, Open Index, Index Info
        #expect(recs.allSatisfy { $0.index == index })
        #expect(
            recs.first.map { Array($0.payload[8..<16]) } == Array("hci\(index)".utf8)
                + [UInt8](repeating: 0, count: 8 - "hci\(index)".utf8.count))
    }

    /// A session with no controller (a simulated cuff) still records index 0, from its connection on.
    @Test func aSimulatedSessionRecordsIndexZero() throws {
        let file = ReplayCommandTests.tempFile("measure-sim.btsnoop")
        defer { try? FileManager.default.removeItem(at: file) }
        let r = try CLI.run([
            "measure", "--simulated", "normal", "--speed", "0", "--adapter", "hci1", "--capture", file.path, "--quiet",
        ])
        #expect(r.status == 0)
        let recs = Self.records([UInt8](try Data(contentsOf: file)))
        #expect(recs.count > 100)
        #expect(recs.allSatisfy { $0.index == 0 })
    }
}
