import Foundation
import Testing

/// Options whose values once got past the parser and failed far later.
///
/// The options that take a number of seconds or a speed. A value outside what a clock of
/// nanoseconds holds (1e300, inf, nan, 1e-300 as a speed) once trapped the spawned `cuff`
/// (SIGILL: `Int64(Double)` out of range) when it started or when the first timer was set; each
/// is now a usage error (64) naming the option and its range, and the ends of the ranges work.
struct OptionRangeTests {
    @Test(arguments: [
        (["measure", "--simulated", "normal", "--timeout", "1e300"], "--timeout takes a number of seconds from 0"),
        (["measure", "--simulated", "normal", "--timeout", "1e10"], "--timeout takes a number of seconds from 0"),
        (["measure", "--simulated", "normal", "--timeout", "inf"], "--timeout takes"),
        (["measure", "--simulated", "normal", "--timeout", "nan"], "--timeout takes"),
        (["measure", "--simulated", "normal", "--stop-after", "nan"], "--stop-after takes"),
        // A typo'd address: this command's usage, not cuff's (probe U).
        (["measure", "A4:C1:38:12:34"], "Usage: cuff measure"),
        (["pair", "A4:C1:38:12:34"], "Usage: cuff pair"),
        (["measure", "--simulated", "normal", "--stop-after", "1e19"], "--stop-after takes"),
        (["scan", "--timeout", "1e300"], "--timeout takes a number of seconds from 0"),
        (["scan", "--timeout=-1"], "--timeout takes"),
        (
            ["measure", "--simulated", "normal", "--speed", "1e-300"],
            "--speed takes 0 or a number from 0.001 to 1000000"
        ),
        (
            ["measure", "--simulated", "normal", "--speed", "1e300"],
            "--speed takes 0 or a number from 0.001 to 1000000"
        ),
        (["simulate", "--listen", "unix:/tmp/cuff-never.sock", "--speed", "1e300"], "--speed takes"),
        (["simulate", "--listen", "unix:/tmp/cuff-never.sock", "--speed", "0.0009"], "--speed takes"),
        (
            ["simulate", "--listen", "unix:/tmp/cuff-never.sock", "--every", "1e300"],
            "--every takes a number of seconds above 0"
        ),
        (
            ["simulate", "--listen", "unix:/tmp/cuff-never.sock", "--every", "0"],
            "--every takes a number of seconds above 0"
        ),
        (
            ["simulate", "--listen", "unix:/tmp/cuff-never.sock", "--handle-gap", "65535"],
            "--handle-gap takes 0 to 4096"
        ),
        // An empty FHIR subject made every Observation invalid FHIR.
        (
            ["history", "--store", "/tmp/cuff-never.db", "--format", "fhir", "--fhir-subject", ""],
            "--fhir-subject: give"
        ),
        (["measure", "--simulated", "normal", "--format", "fhir", "--fhir-subject", "  "], "--fhir-subject: give"),
        // Probe E3: two output formats: the last silently won.
        (
            ["replay", "/dev/null", "--format", "fhir", "--format", "omh"],
            "--format names 2 outputs (fhir, omh): stdout takes one"
        ),
        (["measure", "--simulated", "normal", "--format", "ndjson", "--format", "fhir"], "--format names 2 outputs"),
        (["replay", "/dev/null", "--format", "pcap", "--format", "pcapng"], "--format names 2 capture formats"),
        // Probe E3: a reference to a resource no Observation subject may be was written as given.
        (
            ["measure", "--simulated", "normal", "--format", "fhir", "--fhir-subject", "Foo/bar"],
            "--fhir-subject: 'Foo/bar': an Observation's subject is a Patient, Group, Device, Location"
        ),
        // Probe P: TLS files beside plain mqtt:// were ignored (exit 0, readings in the clear), and
        // a missing CA file was "Invalid function arguments provided".
        (
            ["measure", "--simulated", "normal", "--publish", "mqtt://127.0.0.1:1", "--publish-ca", "/etc/hostname"],
            "give --publish mqtts://"
        ),
        (
            ["measure", "--simulated", "normal", "--publish", "mqtts://127.0.0.1:1", "--publish-ca", "/nonexistent"],
            "--publish-ca /nonexistent: no such file"
        ),
        // Probe S: a second --store silently replaced the first (the first file never made).
        (
            ["measure", "--simulated", "normal", "--store", "/tmp/cuff-never-1.db", "--store", "/tmp/cuff-never-2.db"],
            "--store is given 2 times (/tmp/cuff-never-1.db, /tmp/cuff-never-2.db)"
        ),
        (
            [
                "watch", "--connect", "unix:/tmp/cuff-never.sock", "--publish", "mqtt://127.0.0.1:1", "--outbox",
                "/tmp/a",
                "--outbox", "/tmp/b",
            ],
            "--outbox is given 2 times"
        ),
    ])
    func refused(_ args: [String], _ message: String) throws {
        let r = try CLI.run(args, timeout: 30)
        #expect(r.status == 64, "\(args): \(r.stderr)")
        #expect(r.stderr.contains(message), "\(r.stderr)")
        #expect(r.stdout.isEmpty)
    }

    /// Probe U: `--speed`, `--seed` and `--persona` were taken with a real cuff or `--connect`,
    /// where they do nothing.
    @Test func measureRefusesTheSimulatedCuffsOptionsWithoutOne() throws {
        try refused(
            ["measure", "--connect", "unix:/tmp/cuff-none.sock", "--speed", "2"],
            "--speed shapes a simulated cuff: give --simulated SCENARIO (the cuff behind --connect is shaped by its own cuff simulate)"
        )
        try refused(
            ["measure", "00:11:22:33:44:55", "--seed", "1", "--persona", "bps-1.0"],
            "--persona, --seed shape a simulated cuff: give --simulated SCENARIO")
    }

    @Test(arguments: [
        ["--timeout", "3155760000", "--speed", "0"],  // the longest timeout: its deadline is set, not reached
        ["--speed", "1000000"],  // the fastest paced cuff
        ["--stop-after", "3155760000", "--speed", "0"],
    ])
    func theEndsOfTheRangesWork(_ extra: [String]) throws {
        let r = try CLI.run(["measure", "--simulated", "normal", "--quiet"] + extra, timeout: 60)
        #expect(r.status == 0, "\(extra): \(r.stderr)")
        #expect(try r.stdoutLines.contains { try CLI.json($0)["type"] as? String == "measurement" })
    }

    /// `--stop-after` on the simulated cuff stops it and ends (exit 3), paced or not (probe U: once
    /// the stop was sent the clock stood still, the process spun, and no signal ended it).
    @Test(arguments: [["--speed", "0"], [], ["--speed", "1"]])
    func stopAfterEndsTheSimulatedSession(_ extra: [String]) throws {
        let r = try CLI.run(["measure", "--simulated", "normal", "--stop-after", "2"] + extra, timeout: 30)
        #expect(r.status == 3, "\(extra): \(r.stderr.suffix(500))")
        #expect(r.stderr.contains("stopping (--stop-after reached)"))
        #expect(r.stderr.contains("session ended: stopped"), "\(r.stderr.suffix(500))")
    }

    /// A topic prefix libmosquitto refuses only when it publishes: the reading then waited in the
    /// outbox for good, and `cuff sync` blamed "Malformed UTF-8". Refused when given instead.
    @Test(arguments: [
        (["--ha-discovery-prefix", String(repeating: "p", count: 4097)], "--ha-discovery-prefix takes a topic prefix"),
        (["--ha-discovery-prefix", "ha\u{1B}x"], "--ha-discovery-prefix takes a topic prefix"),
        (["--publish", "mqtt://127.0.0.1:1/a%00b"], "the topic prefix may not contain control characters"),
        (["--publish", "mqtt://127.0.0.1:1/" + String(repeating: "q", count: 70_000)], "at most 4096 bytes"),
    ])
    func topicPrefixesMQTTCannotCarryAreRefused(_ args: [String], _ message: String) throws {
        var all = ["measure", "--simulated", "normal", "--speed", "0"] + args
        if !args.contains("--publish") { all += ["--publish", "mqtt://127.0.0.1:1/x"] }
        let r = try CLI.run(all + ["--outbox", "/tmp/cuff-never-made-outbox.db"], timeout: 30)
        #expect(r.status == 64, "\(r.stderr.prefix(300))")
        #expect(r.stderr.contains(message), "\(r.stderr.prefix(300))")
        #expect(r.stdout.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: "/tmp/cuff-never-made-outbox.db"))
    }
}
