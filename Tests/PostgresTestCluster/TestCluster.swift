// SPDX-License-Identifier: GPL-2.0-or-later
// A throwaway PostgreSQL cluster for the tests: Debian's server binaries, initdb into a temporary
// directory, a private port and socket directory, started and stopped (or killed) by the tests.
import CuffTestSupport
import Foundation
#if canImport(Glibc)
    import Glibc
#endif

public final class TestCluster: @unchecked Sendable {
    public enum Failure: Error, CustomStringConvertible {
        case command(String, Int32, String)
        public var description: String {
            switch self {
            case let .command(c, s, out): "\(c) exited \(s): \(out)"
            }
        }
    }

    /// Debian's server binaries (/usr/lib/postgresql/N/bin, the highest N), or nil when absent.
    public static let binDir: String? = {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted(
            by: >)
        for v in versions where FileManager.default.isExecutableFile(atPath: "\(root)/\(v)/bin/postgres") {
            return "\(root)/\(v)/bin"
        }
        return nil
    }()

    /// Why the tests that need a server skip, or nil when they can run.
    public static var unavailable: String? {
        binDir == nil
            ? "PostgreSQL server binaries are absent (/usr/lib/postgresql/*/bin/postgres; tools/install-deps.sh --test installs Debian's postgresql)"
            : nil
    }

    /// Superuser and its password (TCP connections need it; the socket trusts local users).
    public static let user = "cuff"
    public static let password = "s3cret"

    public let dir: String
    public var dataDir: String { dir + "/data" }
    public var socketDir: String { dir + "/sock" }
    public let port: Int
    /// postgres refuses to run as root: the tests' root runs it as the `postgres` user.
    let asUser: String?

    /// `postgres://cuff:s3cret@127.0.0.1:PORT/DB` (TCP, password, sslmode=disable unless given).
    public func url(_ db: String = "cuff", password: String? = TestCluster.password, sslmode: String? = "disable")
        -> String
    {
        var s = "postgres://\(TestCluster.user)\(password.map { ":" + $0 } ?? "")@127.0.0.1:\(port)/\(db)"
        if let sslmode { s += "?sslmode=\(sslmode)" }
        return s
    }

    /// Makes and starts a cluster with a database `cuff` (and `extraDatabases`).
    public init(ssl: Bool = false) throws {
        guard let bin = TestCluster.binDir else { throw Failure.command("initdb", -1, TestCluster.unavailable ?? "") }
        var template = Array("/tmp/cuff-pg-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw Failure.command("mkdtemp", errno, "") }
        dir = String(cString: p)
        port = TestCluster.freePort()
        asUser = geteuid() == 0 ? "postgres" : nil
        try FileManager.default.createDirectory(atPath: socketDir, withIntermediateDirectories: true)
        let pwfile = dir + "/pw"
        try Data(TestCluster.password.utf8).write(to: URL(fileURLWithPath: pwfile))
        if asUser != nil { try TestCluster.sh(["chown", "-R", "postgres:postgres", dir]) }
        try run(
            "\(bin)/initdb",
            [
                "-D", dataDir, "-U", TestCluster.user, "--pwfile", pwfile, "--auth-local=trust",
                "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync",
            ])
        var conf = """

            port = \(port)
            listen_addresses = '127.0.0.1'
            unix_socket_directories = '\(socketDir)'
            max_connections = 40
            shared_buffers = 16MB
            ssl = \(ssl ? "on" : "off")

            """
        if ssl {
            // A self-signed certificate for localhost, made here.
            try run(
                "/usr/bin/openssl",
                [
                    "req", "-new", "-x509", "-days", "2", "-nodes", "-subj", "/CN=localhost",
                    "-keyout", dataDir + "/server.key", "-out", dataDir + "/server.crt",
                ])
            try run("/bin/chmod", ["600", dataDir + "/server.key"])
            conf += "ssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n"
        }
        let h = try FileHandle(forWritingTo: URL(fileURLWithPath: dataDir + "/postgresql.conf"))
        h.seekToEndOfFile()
        h.write(Data(conf.utf8))
        try h.close()
        try start()
        try createDatabase("cuff")
    }

    deinit {
        _ = try? pgctl(["stop", "-m", "immediate"])
        try? FileManager.default.removeItem(atPath: dir)
    }

    public func start() throws {
        try pgctl(["start", "-w", "-t", "60", "-l", dir + "/log"])
    }

    /// `pg_ctl stop -m fast`: clients are disconnected, the server shuts down cleanly.
    public func stop() throws {
        try pgctl(["stop", "-w", "-m", "fast"])
    }

    /// The postmaster killed with SIGKILL (its backends go with it when they next notice).
    public func kill9() throws {
        let pidText = try String(contentsOfFile: dataDir + "/postmaster.pid", encoding: .utf8)
        guard let pid = pid_t(pidText.split(separator: "\n").first ?? "") else {
            throw Failure.command("postmaster.pid", -1, pidText)
        }
        // Its backends too, so the port and the shared memory are free for the restart.
        let children = (try? TestCluster.sh(["pgrep", "-P", String(pid)])) ?? ""
        kill(pid, SIGKILL)
        for c in children.split(separator: "\n").compactMap({ pid_t($0) }) { kill(c, SIGKILL) }
        var tries = 0
        while Glibc.kill(pid, 0) == 0 && tries < 500 { usleep(10_000); tries += 1 }
        usleep(200_000)
    }

    /// Runs SQL through psql over the socket as the superuser; returns its output (unaligned, tuples only).
    @discardableResult
    public func psql(_ sql: String, db: String = "cuff") throws -> String {
        try run(
            TestCluster.binDir! + "/psql",
            [
                "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", socketDir, "-p", String(port), "-U",
                TestCluster.user, "-d", db, "-c", sql,
            ]
        )
        .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    public func createDatabase(_ name: String) throws {
        try psql("CREATE DATABASE \(name)", db: "postgres")
    }

    @discardableResult
    func pgctl(_ args: [String]) throws -> String {
        try run(TestCluster.binDir! + "/pg_ctl", ["-D", dataDir] + args)
    }

    @discardableResult
    func run(_ exe: String, _ args: [String]) throws -> String {
        if let asUser { return try TestCluster.sh(["/usr/sbin/runuser", "-u", asUser, "--", exe] + args) }
        return try TestCluster.sh([exe] + args)
    }

    /// Runs a command, waits as long as it takes, returns stdout and stderr (one stream); a
    /// non-zero exit throws. (``ChildProcess``, not Foundation's Process: its wait hangs when the
    /// child leaves a daemon behind (pg_ctl start) that inherited Process's own descriptors.)
    @discardableResult
    static func sh(_ argv: [String]) throws -> String {
        let r: RunResult
        do {
            r = try runToCompletion(argv[0], Array(argv.dropFirst()), timeout: nil, mergeStderr: true)
        } catch let error as POSIXError {
            throw Failure.command(argv.joined(separator: " "), error.code.rawValue, "posix_spawn failed")
        }
        guard r.status == 0 else { throw Failure.command(argv.joined(separator: " "), r.status, r.stdout) }
        return r.stdout
    }

    /// A TCP port nobody listens on now (the kernel's pick for port 0).
    public static func freePort() -> Int {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(s) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, len) } }
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &len) }
        }
        return Int(UInt16(bigEndian: addr.sin_port))
    }
}
