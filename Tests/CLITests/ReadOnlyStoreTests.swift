import CuffTestSupport
import Foundation
import Testing

/// `cuff history` of a store on read-only media (a backup, a snapshot, a stick mounted read-only):
/// a tmpfs of the test's own, remounted read-only in a mount namespace (`unshare`).
@Suite("A store on read-only media")
struct ReadOnlyStoreTests {
    /// Probe X: a WAL store there could not be read (SQLite cannot make its `-shm`: "14 (unable to
    /// open database file)"). With no `-wal` beside it, it is read as it is; with one (commits the
    /// file lacks), it is still refused rather than read without them.
    @Test(.enabled(if: WatchFullDiskTests.canMount, "needs unshare --user --mount (a tmpfs of the test's own)"))
    func historyReadsAStoreOnReadOnlyMedia() throws {
        let s = try ScratchDirectory(prefix: "cuff-ro")
        let store = s.path("s #1?.db")  // (characters an SQLite URI must escape)
        let m = try CLI.run(["measure", "--simulated", "normal", "--speed", "0", "--quiet", "--store", store])
        #expect(m.status == 0, "\(m.stderr)")
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: s.path("wal")))
        let mnt = s.path("ro")
        try FileManager.default.createDirectory(atPath: mnt, withIntermediateDirectories: true)
        let b = CLI.binary.path
        let script = """
            set -e
            mount -t tmpfs -o mode=0700 tmpfs '\(mnt)'
            mkdir '\(mnt)/a' '\(mnt)/b'
            cp '\(store)' '\(mnt)/a/s #1?.db'
            cp '\(store)' '\(mnt)/b/s.db'
            cp '\(s.path("wal"))' '\(mnt)/b/s.db-wal'
            chmod 600 '\(mnt)/b/s.db-wal'
            mount -o remount,ro '\(mnt)'
            cd '\(mnt)/a'
            set +e
            '\(b)' history --store 's #1?.db' > '\(s.path("a.out"))' 2> '\(s.path("a.err"))'; echo "a $?" > '\(s.path("rc"))'
            '\(b)' history --store '\(mnt)/b/s.db' > /dev/null 2> '\(s.path("b.err"))'; echo "b $?" >> '\(s.path("rc"))'
            """
        let p = try ChildProcess(
            ["--user", "--map-root-user", "--mount", "/bin/sh", "-c", script], executable: "/usr/bin/unshare",
            stderr: s.path("sh.err"))
        #expect(p.wait(timeout: 60) == 0, "\((try? String(contentsOfFile: s.path("sh.err"), encoding: .utf8)) ?? "")")
        let rc = try String(contentsOfFile: s.path("rc"), encoding: .utf8)
        let aErr = (try? String(contentsOfFile: s.path("a.err"), encoding: .utf8)) ?? ""
        #expect(rc.hasPrefix("a 0\n"), "\(rc) \(aErr)")
        let lines = try String(contentsOfFile: s.path("a.out"), encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("\"systolic\":119.0"), "\(lines)")
        #expect(rc.hasSuffix("b 10\n"), "\(rc)")
        let bErr = (try? String(contentsOfFile: s.path("b.err"), encoding: .utf8)) ?? ""
        #expect(bErr.contains("cannot open store"), "\(bErr)")
    }
}
