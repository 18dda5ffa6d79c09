import CuffTestSupport
import Foundation
import PostgresTestCluster
import Testing

/// A throwaway `mosquitto` (Debian's package) in a temporary directory: a plain listener, a TLS
/// listener and a TLS listener that requires a client certificate (its CN is the user name) on
/// loopback ports, a password file, certificates made with `openssl`, persistence (so a restart
/// keeps the durable reader's queue). Read it with `mosquitto_sub` (``Reader``).
final class MosquittoBroker: @unchecked Sendable {
    let dir: String
    let port: Int
    let tlsPort: Int
    /// TLS with `require_certificate true`: a client certificate signed by ``caFile`` logs in.
    let certPort: Int
    let user = "cuff"
    let password = "pw-\(UUID().uuidString.prefix(8))"
    private var process: ChildProcess?

    var caFile: String { dir + "/ca.crt" }
    /// A CA that did not sign the broker's certificate.
    var otherCAFile: String { dir + "/other-ca.crt" }
    /// A client certificate (CN `cuff`) signed by ``caFile``, and its key.
    var clientCertFile: String { dir + "/client.crt" }
    var clientKeyFile: String { dir + "/client.key" }
    var url: String { "mqtt://\(user):\(password)@127.0.0.1:\(port)/cuff" }

    static var available: Bool {
        ["/usr/sbin/mosquitto", "/usr/bin/mosquitto_sub", "/usr/bin/mosquitto_passwd", "/usr/bin/openssl"].allSatisfy(
            FileManager.default.isExecutableFile)
    }

    init() throws {
        dir = "/tmp/mq-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        port = Self.freePort()
        tlsPort = Self.freePort()
        certPort = Self.freePort()
        try Self.sh("/usr/bin/mosquitto_passwd", ["-c", "-b", dir + "/passwd", user, password])
        // A CA, a server certificate for 127.0.0.1 and localhost signed by it, and another CA.
        let o = "/usr/bin/openssl"
        for ca in ["ca", "other-ca"] {
            try Self.sh(
                o,
                [
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=cuff test \(ca)",
                    "-keyout", "\(dir)/\(ca).key", "-out", "\(dir)/\(ca).crt",
                ])
        }
        try Self.sh(
            o,
            [
                "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", dir + "/server.key",
                "-out", dir + "/server.csr",
            ])
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(
            toFile: dir + "/san.ext", atomically: true, encoding: .utf8)
        try Self.sh(
            o,
            [
                "x509", "-req", "-in", dir + "/server.csr", "-CA", caFile, "-CAkey", dir + "/ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", dir + "/san.ext", "-out", dir + "/server.crt",
            ])
        try Self.sh(
            o,
            [
                "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=\(user)", "-keyout", clientKeyFile, "-out",
                dir + "/client.csr",
            ])
        try Self.sh(
            o,
            [
                "x509", "-req", "-in", dir + "/client.csr", "-CA", caFile, "-CAkey", dir + "/ca.key", "-CAcreateserial",
                "-days", "2", "-out", clientCertFile,
            ])
        let conf = """
            per_listener_settings false
            allow_anonymous false
            password_file \(dir)/passwd
            persistence true
            persistence_location \(dir)/
            autosave_interval 1
            \(getuid() == 0 ? "user root" : "")
            log_dest file \(dir)/broker.log
            listener \(port) 127.0.0.1
            listener \(tlsPort) 127.0.0.1
            cafile \(caFile)
            certfile \(dir)/server.crt
            keyfile \(dir)/server.key
            listener \(certPort) 127.0.0.1
            cafile \(caFile)
            certfile \(dir)/server.crt
            keyfile \(dir)/server.key
            require_certificate true
            use_identity_as_username true

            """
        try conf.write(toFile: dir + "/mosquitto.conf", atomically: true, encoding: .utf8)
        try start()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// Starts the broker and waits until every port takes connections.
    func start() throws {
        process = try ChildProcess(
            ["-c", dir + "/mosquitto.conf"], executable: "/usr/sbin/mosquitto", stdout: dir + "/broker.out",
            stderr: dir + "/broker.err")
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if Self.accepts(port) && Self.accepts(tlsPort) && Self.accepts(certPort) { return }
            usleep(50_000)
        }
        Issue.record(
            "mosquitto did not start: \((try? String(contentsOfFile: dir + "/broker.err", encoding: .utf8)) ?? "")")
    }

    /// Stops the broker: SIGTERM (it saves its persistence file) or SIGKILL (a crash).
    func stop(_ signal: Int32 = SIGTERM) {
        guard let p = process else { return }
        p.signal(signal)
        if p.wait(timeout: 10) == nil {
            p.signal(SIGKILL)
            _ = p.wait(timeout: 5)
        }
        process = nil
    }

    /// A `mosquitto_sub` that collects `topic payload` lines into a file, with a durable session
    /// (QoS 1, `-c`): it reconnects by itself and gets what was published while it was away.
    final class Reader {
        let process: ChildProcess
        let output: String
        init(_ broker: MosquittoBroker, topics: [String], id: String) throws {
            output = broker.dir + "/\(id).out"
            var args = [
                "-h", "127.0.0.1", "-p", String(broker.port), "-u", broker.user, "-P", broker.password, "-q", "1", "-c",
                "-i", id, "-v",
            ]
            for t in topics { args += ["-t", t] }
            process = try ChildProcess(
                args, executable: "/usr/bin/mosquitto_sub", stdout: output, stderr: output + ".err")
        }
        deinit {
            process.signal(SIGTERM)
            _ = process.wait(timeout: 5)
        }
        /// (topic, payload) pairs received so far.
        var messages: [(topic: String, payload: String)] {
            MosquittoBroker.messages(in: output)
        }
    }

    /// The retained messages under `topics` now, read by a fresh client.
    func retained(_ topics: [String]) throws -> [(topic: String, payload: String)] {
        let out = dir + "/retained-\(UUID().uuidString.prefix(6)).out"
        var args = [
            "-h", "127.0.0.1", "-p", String(port), "-u", user, "-P", password, "-v", "--retained-only", "-W", "2",
        ]
        for t in topics { args += ["-t", t] }
        let p = try ChildProcess(args, executable: "/usr/bin/mosquitto_sub", stdout: out)
        _ = p.wait(timeout: 10)
        return Self.messages(in: out)
    }

    /// `mosquitto_sub -v` lines (`topic payload`) of `file`.
    static func messages(in file: String) -> [(topic: String, payload: String)] {
        let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ", maxSplits: 1)
            return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
        }
    }

    static func sh(_ exe: String, _ args: [String]) throws {
        let p = try ChildProcess(args, executable: exe)
        let status = p.wait(timeout: 60)
        guard status == 0 else { throw POSIXError(.EIO) }
    }

    static func freePort() -> Int { TestCluster.freePort() }

    static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        a.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &a) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}
