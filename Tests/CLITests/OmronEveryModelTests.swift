import Foundation
import Omron
import Testing

/// Every model profile of the catalog: `cuff simulate --model M` on a Unix socket and `cuff measure`
/// against it agree (issue #24). Not serialized: the cases run side by side, each with its own
/// simulator process and socket.
@Suite("Every Omron model profile over a Unix socket")
struct OmronEveryModelTests {
    /// No --model on `measure`: Device Information names the model. Every user's unread readings
    /// come out (those the seed gave the simulated cuff), the same again with --keep-unread left
    /// out once, then none new.
    @Test(arguments: OmronCatalog.profiles.map(\.id))
    func simulateAndMeasureAgree(model: String) throws {
        let p = try #require(OmronCatalog.profile(named: model))
        let seeded = OmronSimulator(profile: p, seed: 12, localSeconds: 1_795_622_400)
        let expected = p.users.indices.flatMap { u in
            seeded.unreadReadings(user: u).map { "\(u + 1)|\($0.systolic)|\($0.diastolic)|\($0.pulse)" }
        }
        let sim = try TwoProcessTests.Simulator(["--model", model, "--speed", "100", "--seed", "12"])
        let args = ["measure", "--connect", "unix:\(sim.path)", "--no-set-time", "--timeout", "60"]
        let keep = try CLI.run(args + ["--keep-unread"])
        let mark = try CLI.run(args)
        let none = try CLI.run(args)
        let log = sim.logText
        #expect(sim.stop() == 0, "\(log.suffix(300))")

        func readings(_ r: CLIResult) throws -> [[String: Any]] {
            try r.stdoutLines.map(CLI.json).filter { $0["type"] as? String == "measurement" }
        }
        func values(_ r: CLIResult) throws -> [String] {
            try readings(r).map {
                "\($0["user_id"] ?? "")|\(Int($0["systolic"] as? Double ?? -1))|\(Int($0["diastolic"] as? Double ?? -1))|\(Int($0["pulse_rate"] as? Double ?? -1))"
            }
        }
        #expect(keep.status == 0, "\(keep.stderr.suffix(400))")
        #expect(Set(p.users.indices.map { $0 + 1 }) == Set(try readings(keep).compactMap { $0["user_id"] as? Int }))
        #expect(try values(keep) == expected)
        #expect(
            try readings(keep).allSatisfy {
                ($0["omron"] as? [String: Any])?["model"] as? String == p.id
                    && ($0["device"] as? [String: Any])?["model"] as? String == p.id
            })
        #expect(mark.status == 0, "\(mark.stderr.suffix(400))")
        #expect(try readings(mark).map { $0["raw"] as? String } == (try readings(keep)).map { $0["raw"] as? String })
        #expect(none.status == 2, "\(none.stderr.suffix(400))")
        #expect(try readings(none).isEmpty)
    }
}
