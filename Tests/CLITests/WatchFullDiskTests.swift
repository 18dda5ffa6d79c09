import CuffTestSupport
import Foundation
import Testing

/// `cuff watch --store` on a filesystem that fills up and frees again: a real tmpfs of its own,
/// mounted in a mount namespace (`unshare`, as root or through a user namespace), filled by the test.
@Suite("cuff watch on a full disk", .serialized)
struct WatchFullDiskTests {
    /// Whether this machine lets the test mount a tmpfs in a namespace of its own.
    static let canMount: Bool = {
        guard
            let p = try? ChildProcess(
                ["--user", "--map-root-user", "--mount", "/bin/sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                executable: "/usr/bin/unshare")
        else { return false }
        return p.wait(timeout: 30) == 0
    }()

    /// Fills the filesystem holding `path` until it has no block left.
    static func fill(_ path: String) -> Int {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { return -1 }
        defer { close(fd) }
        var total = 0
        for size in [65536, 4096, 512, 1] {
            let chunk = [UInt8](repeating: 0xA5, count: size)
            while true {
                let n = chunk.withUnsafeBytes { write(fd, $0.baseAddress, size) }
                if n <= 0 { break }
                total += n
            }
        }
        return total
    }

    @Test(.enabled(if: canMount, "needs unshare --user --mount (a tmpfs of the test's own)"))
    func aFullDiskIsOneErrorLineNothingConfirmedIsLostAndExitIs10() throws {
        let s = try ScratchDirectory()
        let fs = s.path("fs")
        try FileManager.default.createDirectory(atPath: fs, withIntermediateDirectories: true)
        let fleet = try SimulatedFleet.start(in: s, cuffs: 2)
        let script =
            "mount -t tmpfs -o size=4m,mode=0700 tmpfs '\(fs)' && exec '\(CLI.binary.path)' watch --connect 'unix:\(s.path("cuffs"))' --store '\(fs)/w.db'"
        let watch = try ChildProcess(
            ["--user", "--map-root-user", "--mount", "/bin/sh", "-c", script], executable: "/usr/bin/unshare",
            stdout: s.path("out"), stderr: s.path("watch.err"))
        func printed() -> [[String: Any]] { (try? WatchCommandTests.measurementLines(s.lines("out"))) ?? [] }
        func failureLines() -> Int { s.lines("watch.err").filter { $0.contains("cannot keep readings") }.count }
        #expect(waitUntil(30) { printed().count >= 2 }, "\(s.text("watch.err").suffix(1500))")

        // The store's filesystem, seen from outside the namespace, filled to the last block.
        let inside = "/proc/\(watch.pid)/root\(fs)"
        #expect(FileManager.default.fileExists(atPath: inside + "/w.db"), "the store is not on the tmpfs")
        #expect(Self.fill(inside + "/filler") > 0)
        #expect(waitUntil(20) { failureLines() >= 1 }, "\(s.text("watch.err").suffix(1500))")
        let whileFull = printed().count
        // Readings keep coming (two cuffs, one a second each) and keep failing: still one line.
        Thread.sleep(forTimeInterval: 5)
        #expect(failureLines() == 1, "\(s.text("watch.err").suffix(2500))")
        #expect(printed().count == whileFull, "a reading the store did not keep was printed")

        // The disk frees up: watch collects again, the readings the cuffs kept among them.
        #expect(unlink(inside + "/filler") == 0)
        #expect(waitUntil(60) { printed().count >= whileFull + 3 }, "\(s.text("watch.err").suffix(2500))")
        #expect(s.text("watch.err").contains("the store keeps readings again"))

        fleet.signal(SIGTERM)
        #expect(fleet.wait(timeout: 20) == 0)
        watch.signal(SIGTERM)
        #expect(watch.wait(timeout: 20) == 10, "a sink failed during the run: \(s.text("watch.err").suffix(1500))")

        let err = s.text("watch.err")
        // No reading on stderr: no dedup key (device, user, time stamp, raw words), no values.
        for leak in ["|user:", "|ts:", "|seq:", "mmHg", "systolic"] {
            #expect(!err.contains(leak), "stderr carries a reading (\(leak)): \(err.suffix(2500))")
        }
        let all = printed()
        let keys = all.map(WatchCommandTests.key)
        #expect(Set(keys).count == keys.count, "a reading was printed twice")
        // The summary counts what was kept, and nothing confirmed to a cuff was lost.
        let summary = try #require(err.split(separator: "\n").last { $0.contains("stopped:") })
        #expect(summary.contains("stopped: \(all.count) reading(s) kept"), "\(summary)")
        #expect(summary.contains("not kept"), "\(summary)")
        #expect(!err.contains("ended (a reading could not be kept; 1 new measurement"), "\(err.suffix(2500))")
        let totals = try #require(WatchCommandTests.simulatorTotals(s.text("sim.err")), "\(s.text("sim.err"))")
        #expect(all.count >= totals.confirmed, "\(all.count) kept, \(totals.confirmed) confirmed to the cuffs")
    }

    /// A file-size limit (`ulimit -f`) is a store error, said and with exit status 10, not a kill
    /// by SIGXFSZ without a word (probe M: `watch` died with status 153 and nothing on stderr).
    @Test func aFileSizeLimitIsAStoreErrorNotAKill() throws {
        let s = try ScratchDirectory()
        let r = try runToCompletion(
            "/bin/sh",
            [
                "-c",
                "ulimit -f 8; exec \"$0\" measure --simulated normal --speed 0 --store \"$1\"", CuffBinary.path,
                s.path("s.db"),
            ], stdin: nil, timeout: 120, environment: [:])
        #expect(r.status == 10, "status \(r.status): \(r.stderr)")
        #expect(r.stderr.contains(s.path("s.db")), "\(r.stderr)")
    }
}
