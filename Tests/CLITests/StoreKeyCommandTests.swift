import CuffTestSupport
import Foundation
import Testing

/// `cuff key new`, `--store-key-file`, `cuff key rotate`, as a user runs them.
@Suite("cuff key and encrypted stores")
struct StoreKeyCommandTests {
    static func tempDir() throws -> String {
        let d = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-key-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        return d
    }

    static func files(_ store: String) -> [Data] {
        ["", "-wal", "-shm", "-journal"].compactMap { FileManager.default.contents(atPath: store + $0) }
    }

    /// The "done when": a simulated session's store holds no value, serial or raw hex;
    /// history with the key reads it; another key, or none, is refused (exit 10).
    @Test func measuredStoreIsUnreadableWithoutItsKey() throws {
        let d = try Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: d) }
        #expect(try CLI.run(["key", "new", d + "/k"]).status == 0)
        let m = try CLI.run([
            "measure", "--simulated", "stored-records", "--speed", "0", "--quiet", "--store", d + "/s.db",
            "--store-key-file", d + "/k",
        ])
        #expect(m.status == 0, "\(m.stderr)")
        let measured = try m.stdoutLines.map(CLI.json).filter { $0["type"] as? String == "measurement" }
        #expect(measured.count >= 2)
        var needles: [String] = []
        for o in measured {
            needles.append(o["raw"] as! String)
            needles.append(o["received_at"] as! String)
            if let t = o["timestamp"] as? String { needles.append(t) }
            if let dev = o["device"] as? [String: Any] {
                needles += ["serial", "name", "address", "model"].compactMap { dev[$0] as? String }
            }
            for k in ["systolic", "diastolic", "pulse_rate"] {
                if let v = o[k] as? Double { needles.append("\"\(k)\":\(v)") }
            }
        }
        #expect(needles.contains("SIM-000001"))
        let blobs = Self.files(d + "/s.db")
        // (Needles of 6 bytes or more: a shorter one may be in any 100 kB of ciphertext by chance.)
        for n in Set(needles) where n.utf8.count >= 6 {
            #expect(!blobs.contains { $0.range(of: Data(n.utf8)) != nil }, "\(n) found in the store")
        }
        for o in measured {
            let raw = o["raw"] as! String
            let bytes = Data(
                stride(from: 0, to: raw.count, by: 2).map { UInt8(raw.dropFirst($0).prefix(2), radix: 16)! })
            #expect(!blobs.contains { $0.range(of: bytes) != nil }, "raw bytes \(raw) found in the store")
        }

        let h = try CLI.run(["history", "--store", d + "/s.db", "--store-key-file", d + "/k"])
        #expect(h.status == 0)
        #expect(
            Set(h.stdoutLines.compactMap { try? CLI.json($0)["raw"] as? String })
                == Set(measured.compactMap { $0["raw"] as? String }))
        // The same through the environment variable.
        let env = try CLI.run(["history", "--store", d + "/s.db"], environment: ["CUFF_STORE_KEY_FILE": d + "/k"])
        #expect(env.status == 0 && env.stdout == h.stdout)

        #expect(try CLI.run(["key", "new", d + "/other"]).status == 0)
        let wrong = try CLI.run(["history", "--store", d + "/s.db", "--store-key-file", d + "/other"])
        #expect(wrong.status == 10 && wrong.stderr.contains("another key") && wrong.stdout.isEmpty)
        let none = try CLI.run(["history", "--store", d + "/s.db"])
        #expect(none.status == 10 && none.stderr.contains("is encrypted"))
        let loose = try CLI.run(["key", "new", d + "/loose"])
        #expect(loose.status == 0)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: d + "/loose")
        let l = try CLI.run(["history", "--store", d + "/s.db", "--store-key-file", d + "/loose"])
        #expect(l.status == 10 && l.stderr.contains("mode 644"))
        #expect(try CLI.run(["key", "new", d + "/k"]).status == 10)  // never overwrites
    }

    /// kill -9 at random points of a rotation: the store then opens with one of the two keys and
    /// holds every reading.
    /// Probe X: `cuff key new` on a full disk left an empty key file, which the next try refused
    /// to overwrite and every command refused as "not a cuff key". A write that fails (here: a file
    /// size limit of 0, its signal ignored so the write fails with EFBIG) leaves no file.
    @Test func aKeyThatCannotBeWrittenLeavesNoFile() throws {
        let d = try Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: d) }
        let r = try runToCompletion(
            "/bin/sh", ["-c", "trap '' XFSZ; ulimit -f 0; exec \"$0\" key new \"$1\"", CLI.binary.path, d + "/k"])
        // (Its stderr is a file too, so the limit keeps the message from it: the status says.)
        #expect(r.status == 10, "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: d + "/k"))
        // And then it can be made.
        #expect(try CLI.run(["key", "new", d + "/k"]).status == 0)
        #expect(try String(contentsOfFile: d + "/k", encoding: .utf8).count == 65)
    }

    @Test func interruptedRotationLeavesAStoreOneOfTheKeysOpens() throws {
        let d = try Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: d) }
        #expect(try CLI.run(["key", "new", d + "/k0"]).status == 0)
        // Many readings, so that a rotation takes long enough to be cut: every committed capture, twice over.
        let captures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("captures")
        let files = try FileManager.default.contentsOfDirectory(atPath: captures.path).filter {
            $0.hasSuffix(".btsnoop")
        }.sorted()
        for f in files {
            let r = try CLI.run([
                "replay", captures.appendingPathComponent(f).path, "--quiet", "--store", d + "/s.db",
                "--store-key-file", d + "/k0",
            ])
            #expect(r.status == 0 || r.status == 2, "\(f): \(r.stderr)")
        }
        let expected = try CLI.run(["history", "--store", d + "/s.db", "--store-key-file", d + "/k0"])
        #expect(expected.status == 0 && expected.stdoutLines.count > 10)
        var current = "k0"
        var cut = 0
        for round in 1...10 {
            let next = "k\(round)"
            #expect(try CLI.run(["key", "new", d + "/" + next]).status == 0)
            let p = try ChildProcess(
                [
                    "key", "rotate", "--store", d + "/s.db", "--store-key-file", d + "/" + current, "--new-key-file",
                    d + "/" + next,
                ],
                stderr: d + "/rotate-\(round).err")
            usleep(UInt32.random(in: 0...35_000))  // a rotation run takes ~30 ms here: before, during, after
            p.signal(SIGKILL)
            let status = p.wait(timeout: 60)
            if status != 0 { cut += 1 }
            let withNew = try CLI.run(["history", "--store", d + "/s.db", "--store-key-file", d + "/" + next])
            let withOld = try CLI.run(["history", "--store", d + "/s.db", "--store-key-file", d + "/" + current])
            #expect((withNew.status == 0) != (withOld.status == 0), "round \(round): exactly one key opens the store")
            let opened = withNew.status == 0 ? withNew : withOld
            #expect(opened.stdout == expected.stdout, "round \(round): every reading, unchanged")
            if withNew.status == 0 { current = next }
        }
        // A rotation run to its end moves the store to the new key.
        #expect(try CLI.run(["key", "new", d + "/final"]).status == 0)
        let r = try CLI.run([
            "key", "rotate", "--store", d + "/s.db", "--store-key-file", d + "/" + current, "--new-key-file",
            d + "/final",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(
            try CLI.run(["history", "--store", d + "/s.db", "--store-key-file", d + "/final"]).stdout == expected.stdout
        )
        #expect(try CLI.run(["history", "--store", d + "/s.db", "--store-key-file", d + "/" + current]).status == 10)
        #expect(cut > 0, "some rotations were cut")
    }
}
