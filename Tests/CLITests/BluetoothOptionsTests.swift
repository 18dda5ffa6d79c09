import Foundation
import Testing

/// The Bluetooth options `measure`, `watch`, `pair` and `scan` share, and `--format`'s values, as
/// the spawned `cuff` parses them: an option a command does not take, or a value no format has,
/// is a usage error (64) naming it, before anything is opened.
struct BluetoothOptionsTests {
    @Test(arguments: [
        (["scan", "--security", "high"], "Unknown option '--security'"),
        (["scan", "--bonds", "/tmp/none"], "Unknown option '--bonds'"),
        (["pair", "AA:BB:CC:DD:EE:FF", "--no-set-time"], "Unknown option '--no-set-time'"),
        (
            ["watch", "--connect", "unix:/tmp/none", "--security", "high"],
            "--device, --security, --bonds and --backend go with --adapter hciN"
        ),
        (["pair", "AA:BB:CC:DD:EE:FF", "--security", "low"], "--security takes medium or high"),
        (["measure", "--simulated", "normal", "--format", "xml"], "'xml'"),
    ])
    func refused(_ args: [String], _ message: String) throws {
        let r = try CLI.run(args)
        #expect(r.status == 64)
        #expect(r.stderr.contains(message), "\(r.stderr)")
        #expect(r.stdout.isEmpty)
    }

    @Test func theSharedOptionsStillWork() throws {
        // --no-set-time and --format from the shared groups reach the session and the sinks.
        let r = try CLI.run([
            "measure", "--simulated", "normal", "--speed", "0", "--no-set-time", "--format", "omh", "--quiet",
        ])
        #expect(r.status == 0)
        let lines = r.stdoutLines
        #expect(!lines.isEmpty)
        for l in lines { #expect(try CLI.json(l)["header"] != nil) }
    }
}
