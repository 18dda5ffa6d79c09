import CuffTestSupport
import Foundation
import Testing

/// `tools/vm/clone-under-tmp.sh`, what the test command runs the VM test from (issue 28, item 7):
/// a real clone under /tmp, not a copy of the tracked files, with its `.build` reached through
/// /tmp. Run on a small repository made here (the VM itself is not started).
@Suite("The VM test's clone under /tmp", .serialized)
struct VMCloneScriptTests {
    struct Shell {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// `script` run by bash in `dir`.
    static func sh(_ script: String, in dir: String) throws -> Shell {
        let out = dir + "/.sh.out", err = dir + "/.sh.err"
        let p = try ChildProcess(
            ["-c", "cd \"$0\" && " + script, dir], executable: "/bin/bash", stdout: out, stderr: err)
        let status = p.wait(timeout: 60) ?? -1
        defer { for f in [out, err] { try? FileManager.default.removeItem(atPath: f) } }
        return Shell(
            status: status, stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    /// A folder outside any repository, holding `a.txt` and a `.build` with a marker.
    static func checkout() throws -> String {
        let dir = "/tmp/cuff-vm-clone-test-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir + "/.build", withIntermediateDirectories: true)
        try "built\n".write(toFile: dir + "/.build/marker", atomically: true, encoding: .utf8)
        try "committed\n".write(toFile: dir + "/a.txt", atomically: true, encoding: .utf8)
        return dir
    }

    static var script: String { CLI.packageRoot.appendingPathComponent("tools/vm/clone-under-tmp.sh").path }

    /// Runs the script on `root`; returns the clone and the build link's folder (removed by the caller).
    static func clone(_ root: String) throws -> (clone: String, build: String, stderr: String) {
        let r = try sh("bash \"\(script)\" \"\(root)\"", in: root)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        try #require(lines.count == 2, "\(r.stdout)\(r.stderr)")
        return (lines[0], lines[1], r.stderr)
    }

    @Test func aGitCheckoutIsClonedUnderTmpWithItsBuildLinkedThroughTmp() throws {
        let root = try Self.checkout()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let setup = try Self.sh(
            """
            git init -q . && git add a.txt && git -c user.name=t -c user.email=t@t commit -qm one && echo changed > a.txt
            """, in: root)
        try #require(setup.status == 0, "\(setup.stderr)")
        let (clone, build, stderr) = try Self.clone(root)
        defer { for d in [clone, build] { try? FileManager.default.removeItem(atPath: d) } }
        #expect(clone.hasPrefix("/tmp/") && build.hasPrefix("/tmp/"))
        // A clone: a repository of its own at the checkout's commit, with the committed content.
        let head = try Self.sh("git rev-parse HEAD", in: root).stdout
        let cloned = try Self.sh("git rev-parse HEAD && git rev-parse --show-toplevel", in: clone).stdout.split(
            separator: "\n")
        #expect(cloned.first.map(String.init) == head.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(cloned.last.map(String.init) == URL(fileURLWithPath: clone).resolvingSymlinksInPath().path)
        #expect(try String(contentsOfFile: clone + "/a.txt", encoding: .utf8) == "committed\n")
        #expect(stderr.contains("changes not committed are not in the VM test's clone"), "\(stderr)")
        // Its .build: a link into /tmp that leads to the checkout's build.
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: clone + "/.build").hasPrefix(build))
        #expect(try String(contentsOfFile: clone + "/.build/marker", encoding: .utf8) == "built\n")
    }

    @Test func aCheckoutThatIsNoRepositoryIsCopiedWithoutItsBuild() throws {
        let root = try Self.checkout()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (clone, build, _) = try Self.clone(root)
        defer { for d in [clone, build] { try? FileManager.default.removeItem(atPath: d) } }
        #expect(try String(contentsOfFile: clone + "/a.txt", encoding: .utf8) == "committed\n")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: clone + "/.build").hasPrefix(build))
        #expect(try String(contentsOfFile: clone + "/.build/marker", encoding: .utf8) == "built\n")
    }
}
