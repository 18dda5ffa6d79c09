import CuffTestSupport
import Foundation
import Testing

/// `--quirk NAME` forces a profile the device would not get by itself: a strict-standard
/// simulated cuff read as a Beurer BM85 (pulse big-endian) by `measure`, `replay` and `watch`.
/// Each reading's pulse must be what `cuff decode --quirk beurer-bm85` makes of its raw bytes,
/// and differ from the standard decoding (so the profile, not the cuff, made it).
@Suite("--quirk NAME forced on measure, replay and watch", .serialized)
struct ForcedQuirkCLITests {
    typealias Simulator = TwoProcessTests.Simulator
    static let quirk = "beurer-bm85"

    /// The pulse `cuff decode` reads in `raw`, with the profile or without.
    static func decodedPulse(_ raw: String, quirk: String?) throws -> String {
        let r = try CLI.run(["decode"] + (quirk.map { ["--quirk", $0] } ?? []) + [raw])
        #expect(r.status == 0, "\(r.stderr)")
        return "\(try CLI.json(try #require(r.stdoutLines.first))["pulse_rate"] ?? "none")"
    }

    static func pulse(_ m: [String: Any]) -> String { "\(m["pulse_rate"] ?? "none")" }

    /// Every measurement's pulse is the profile's reading of its raw value (`forced`), or the
    /// standard one (not forced); the two differ.
    static func check(_ ms: [[String: Any]], forced: Bool) throws {
        #expect(!ms.isEmpty)
        for m in ms {
            let raw = try #require(m["raw"] as? String)
            let withProfile = try decodedPulse(raw, quirk: quirk), standard = try decodedPulse(raw, quirk: nil)
            #expect(withProfile != standard, "the reading \(raw) cannot tell the profile from the standard")
            #expect(pulse(m) == (forced ? withProfile : standard), "\(raw): pulse \(pulse(m))")
        }
    }

    @Test func measureThenReplayOfItsCapture() throws {
        let sim = try Simulator(["--speed", "100", "--autostart", "--seed", "3"])
        let s = try ScratchDirectory()  // (the simulator's folder goes when it stops)
        let capture = s.path("c.btsnoop")
        let r = try CLI.run([
            "measure", "--connect", "unix:\(sim.path)", "--timeout", "60", "--quirk", Self.quirk, "--capture", capture,
        ])
        let log = sim.logText
        #expect(sim.stop() == 0, "\(log)")
        #expect(r.status == 0, "\(r.stderr)")
        let measured = try WatchCommandTests.measurementLines(r.stdoutLines)
        try Self.check(measured, forced: true)
        // The capture replayed: forced again, the same readings; not forced, the standard ones.
        let forced = try CLI.run(["replay", capture, "--quirk", Self.quirk])
        #expect(forced.status == 0, "\(forced.stderr)")
        let replayed = try WatchCommandTests.measurementLines(forced.stdoutLines)
        #expect(replayed.map(Self.pulse) == measured.map(Self.pulse))
        try Self.check(replayed, forced: true)
        let plain = try CLI.run(["replay", capture])
        try Self.check(try WatchCommandTests.measurementLines(plain.stdoutLines), forced: false)
    }

    @Test func watchAppliesItToEveryCuff() throws {
        let s = try ScratchDirectory()
        let fleet = try SimulatedFleet.start(in: s, cuffs: 2)
        let watch = try ChildProcess(
            ["watch", "--connect", "unix:" + s.path("cuffs"), "--quirk", Self.quirk], stdout: s.path("out"),
            stderr: s.path("watch.err"))
        func printed() -> [[String: Any]] { (try? WatchCommandTests.measurementLines(s.lines("out"))) ?? [] }
        #expect(waitUntil(60) { printed().count >= 2 }, "\(s.text("watch.err"))")
        watch.signal(SIGTERM)
        #expect(watch.wait(timeout: 40) == 0, "\(s.text("watch.err"))")
        fleet.signal(SIGTERM)
        _ = fleet.wait(timeout: 20)
        try Self.check(printed(), forced: true)
    }
}
