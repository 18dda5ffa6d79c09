// SPDX-License-Identifier: GPL-2.0-or-later
import CuffLogging
import Foundation
import Testing

@testable import PostgresStore

@Suite("postgres:// URLs, PGPASSWORD and the password file")
struct PostgresURLTests {
    let env = ["HOME": "/nonexistent", "USER": "hub"]

    @Test func fullURL() throws {
        let u = try PostgresURL(
            parsing:
                "postgres://al%40ice:p%3Ass@db.example.org:6543/clinic?sslmode=verify-full&sslrootcert=/etc/ca.pem",
            environment: env)
        #expect(u.user == "al@ice")
        #expect(u.password == "p:ss")
        #expect(u.passwordSource == "url")
        #expect(u.host == "db.example.org")
        #expect(u.port == 6543)
        #expect(u.database == "clinic")
        #expect(u.sslMode == .verifyFull)
        #expect(u.sslRootCert == "/etc/ca.pem")
        #expect(u.socketPath == nil)
        #expect(!u.description.contains("p:ss") && !u.description.contains("p%3Ass"))
    }

    @Test func defaultsAsLibpq() throws {
        let u = try PostgresURL(parsing: "postgresql://", environment: env)
        #expect(u.user == "hub")
        #expect(u.database == "hub")
        #expect(u.host == "localhost")
        #expect(u.port == 5432)
        #expect(u.sslMode == .prefer)
        #expect(u.password == nil)
        let v = try PostgresURL(
            parsing: "postgres://x@h/d",
            environment: env.merging(["PGPORT": "7000", "PGSSLMODE": "require", "PGPASSWORD": "pw"]) { $1 })
        #expect(v.port == 7000)
        #expect(v.sslMode == .require)
        #expect(v.password == "pw")
        #expect(v.passwordSource == "PGPASSWORD")
        #expect(try PostgresURL(parsing: "postgres://x@h/d?sslmode=allow", environment: env).sslMode == .prefer)
        #expect(try PostgresURL(parsing: "postgres://x@[::1]:5433/d", environment: env).host == "::1")
    }

    /// Readings that may cross a network unencrypted are said: sslmode=disable or prefer to
    /// another machine; never for this machine (loopback, localhost, a Unix socket) or with TLS a must.
    @Test func cleartextToAnotherMachineIsSaid() throws {
        func warning(_ url: String) throws -> String? {
            try PostgresURL(parsing: url, environment: env).cleartextWarning
        }
        let disable = try #require(try warning("postgres://u:pw@db.example.org/d?sslmode=disable"))
        #expect(disable.contains("in the clear") && disable.contains("sslmode=disable") && !disable.contains("pw"))
        #expect(try warning("postgres://u@10.0.0.7/d")?.contains("if the server offers no TLS") == true)
        for local in [
            "postgres://u@127.0.0.1/d?sslmode=disable", "postgres://u@localhost/d?sslmode=disable",
            "postgres://u@[::1]/d?sslmode=disable", "postgres://u@%2Frun%2Fpostgresql/d", "postgresql://",
            "postgres://u@db.example.org/d?sslmode=require", "postgres://u@db.example.org/d?sslmode=verify-full",
        ] {
            #expect(try warning(local) == nil, "\(local)")
        }
    }

    @Test func unixSocketDirectory() throws {
        let a = try PostgresURL(parsing: "postgres://u@%2Frun%2Fpostgresql:5433/d", environment: env)
        #expect(a.socketPath == "/run/postgresql/.s.PGSQL.5433")
        #expect(a.host == nil)
        let b = try PostgresURL(parsing: "postgres://u@/d?host=/tmp/s", environment: env)
        #expect(b.socketPath == "/tmp/s/.s.PGSQL.5432")
        #expect(throws: PostgresURL.ParseError.self) {
            try PostgresURL(parsing: "postgres://u@/d?host=/tmp/s&sslmode=require", environment: env)
        }
    }

    @Test(arguments: [
        ("mysql://u@h/d", "must start with postgres://"),
        ("postgres://u@h:99999/d", "port '99999'"),
        ("postgres://u@h:abc/d", "port 'abc'"),
        ("postgres://u@h/d?sslmode=always", "sslmode 'always'"),
        ("postgres://u@h/d?colour=blue", "unknown parameter 'colour'"),
        ("postgres://u@h/d/e", "has a '/'"),
        ("postgres://u:pw@[::1/d", "closing ]"),
    ])
    func badURLsSayWhatIsWrong(url: String, says: String) throws {
        let e = #expect(throws: PostgresURL.ParseError.self) { try PostgresURL(parsing: url, environment: env) }
        #expect(e?.description.contains(says) == true, "\(e?.description ?? "")")
        #expect(e?.description.contains(":pw@") == false, "the password is not shown")
    }

    @Test func redaction() {
        #expect(PostgresURL.redacting("postgres://u:secret@h/d") == "postgres://u:***@h/d")
        #expect(
            PostgresURL.redacting("postgres://u@h/d?password=secret&sslmode=require")
                == "postgres://u@h/d?password=***&sslmode=require")
        #expect(PostgresURL.redacting("postgres://h/d") == "postgres://h/d")
    }

    @Test func passFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-pgpass-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/pgpass"
        try """
        # comment
        other:5432:*:u:nope
        db.example.org:6543:clinic:u:first\\:one
        *:*:*:u:fallback
        localhost:5432:d:v:socket

        """.write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o600)
        let e = env.merging(["PGPASSFILE": file]) { $1 }
        let a = try PostgresURL(parsing: "postgres://u@db.example.org:6543/clinic", environment: e)
        #expect(a.password == "first:one")
        #expect(a.passwordSource == file)
        #expect(try PostgresURL(parsing: "postgres://u@elsewhere/x", environment: e).password == "fallback")
        #expect(try PostgresURL(parsing: "postgres://v@%2Ftmp%2Fs/d", environment: e).password == "socket")
        #expect(try PostgresURL(parsing: "postgres://w@h/d", environment: e).password == nil)
        // The URL's and PGPASSWORD win over the file.
        #expect(try PostgresURL(parsing: "postgres://u:given@h/d", environment: e).password == "given")
        #expect(
            try PostgresURL(parsing: "postgres://u@h/d", environment: e.merging(["PGPASSWORD": "env"]) { $1 }).password
                == "env")
        // A file others can read is ignored, as libpq does.
        chmod(file, 0o644)
        let warned = LogRecorder()
        #expect(
            PassFile.lookup(file: file, host: "h", port: 5432, database: "d", user: "u", warn: warned.logger()) == nil)
        #expect(warned.lines.first?.contains("group or world access") == true)
    }
}
