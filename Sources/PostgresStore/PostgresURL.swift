// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import Foundation
import Logging
import Sinks
import Transport

/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=…&host=…&connect_timeout=…&sslrootcert=…]`
/// (or `postgresql://`), read as libpq reads it.
///
/// * Parts are percent-decoded. A host that starts with `/` (`%2Frun%2Fpostgresql`), or a `host=`
///   parameter that does, is a Unix socket directory: the socket is `DIR/.s.PGSQL.PORT`.
/// * Missing parts take libpq's defaults: `PGHOST` (else localhost), `PGPORT` (else 5432), `PGUSER`
///   (else the login name), `PGDATABASE` (else the user name), `PGSSLMODE` (else `prefer`).
/// * The password: the URL's, else `PGPASSWORD`, else the first matching line of the
///   `~/.pgpass`-style file (`PGPASSFILE`, else `~/.pgpass`; ignored unless mode 0600 or stricter).
public struct PostgresURL: Sendable, Hashable, CustomStringConvertible {
    /// TLS as libpq's `sslmode` asks for it.
    public enum SSLMode: String, Sendable, Hashable, CaseIterable {
        /// No TLS.
        case disable
        /// TLS when the server offers it, else plain (no certificate check; libpq's `allow` is read as this).
        case prefer
        /// TLS or nothing; the certificate is not checked (as libpq without a root certificate).
        case require
        /// TLS; the certificate must chain to a trusted root (`sslrootcert`, else the system's).
        case verifyCA = "verify-ca"
        /// As verify-ca, and the certificate must name the host.
        case verifyFull = "verify-full"
    }

    public var user: String
    public var password: String?
    /// Where the password came from: `url`, `PGPASSWORD`, the passfile's path, or nil.
    public var passwordSource: String?
    /// A TCP host name or address; nil with a Unix socket.
    public var host: String?
    /// The Unix socket directory, or nil for TCP.
    public var socketDirectory: String?
    public var port: Int
    public var database: String
    public var sslMode: SSLMode
    /// `sslrootcert=PATH`: the trusted roots for verify-ca / verify-full.
    public var sslRootCert: String?
    /// `connect_timeout=SECONDS` (default 5; libpq's default is to wait forever, which a session must not).
    public var connectTimeoutSeconds: Int

    /// The socket file with a socket directory.
    public var socketPath: String? { socketDirectory.map { "\($0)/.s.PGSQL.\(port)" } }

    /// The URL without its password, for messages and logs.
    public var description: String {
        var s = "postgres://\(Self.escape(user))@"
        if let host {
            s += host.contains(":") ? "[\(host)]" : host
        } else if let socketDirectory {
            s += Self.escape(socketDirectory)
        }
        s += ":\(port)/\(Self.escape(database))"
        var q: [String] = []
        if sslMode != .prefer { q.append("sslmode=\(sslMode.rawValue)") }
        return q.isEmpty ? s : s + "?" + q.joined(separator: "&")
    }

    /// A short name for the server: `HOST:PORT` or the socket's path.
    public var serverName: String { socketPath ?? "\(host ?? "localhost"):\(port)" }

    /// Whether the server is this machine: a Unix socket, a loopback address or `localhost`.
    public var isLocal: Bool {
        guard socketDirectory == nil, let host else { return true }
        return HostName.isThisMachine(host)
    }

    /// What to tell the user when readings (health data) may cross a network unencrypted: with
    /// `sslmode=disable` to another machine they do; with `prefer` they do when that server offers
    /// no TLS (and no certificate is checked). Nil when TLS is a must or the server is local.
    public var cleartextWarning: String? {
        guard !isLocal else { return nil }
        switch sslMode {
        case .disable:
            return
                "\(description) is not this machine and sslmode=disable: readings (health data) cross the network in the clear; "
                + "use sslmode=verify-full"
        case .prefer:
            return
                "\(description) is not this machine and sslmode=prefer: readings (health data) cross the network in the clear "
                + "if the server offers no TLS; sslmode=verify-full (or require) makes TLS a must"
        case .require, .verifyCA, .verifyFull:
            return nil
        }
    }

    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        public var url: String
        public var reason: String
        public var description: String { "bad PostgreSQL URL \(url): \(reason)" }
    }

    /// Parses `text` with the process's environment and passfile.
    public init(parsing text: String, environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(ParseError)
    {
        // The URL as shown in errors: without a password.
        let shown = Self.redacting(text)
        func bad(_ reason: String) -> ParseError { ParseError(url: shown, reason: reason) }
        let lower = text.lowercased()
        let rest: Substring
        if lower.hasPrefix("postgres://") {
            rest = text.dropFirst("postgres://".count)
        } else if lower.hasPrefix("postgresql://") {
            rest = text.dropFirst("postgresql://".count)
        } else {
            throw bad("it must start with postgres:// or postgresql://")
        }
        var main = rest
        var query: Substring = ""
        if let q = rest.firstIndex(of: "?") {
            main = rest[..<q]
            query = rest[rest.index(after: q)...]
        }
        var authority = main
        var path: Substring = ""
        if let slash = main.firstIndex(of: "/") {
            authority = main[..<slash]
            path = main[main.index(after: slash)...]
        }
        var userInfo: Substring?
        var hostPort = authority
        if let at = authority.lastIndex(of: "@") {
            userInfo = authority[..<at]
            hostPort = authority[authority.index(after: at)...]
        }
        func decode(_ s: Substring, _ what: String) throws(ParseError) -> String {
            guard let d = String(s).removingPercentEncoding else { throw bad("\(what) has a bad %-escape") }
            return d
        }
        var user: String?
        var password: String?
        if let userInfo {
            if let colon = userInfo.firstIndex(of: ":") {
                user = try decode(userInfo[..<colon], "the user")
                password = try decode(userInfo[userInfo.index(after: colon)...], "the password")
            } else {
                user = try decode(userInfo, "the user")
            }
            if user == "" { user = nil }
        }
        var host: String?
        var portText: Substring?
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { throw bad("an IPv6 host needs its closing ]") }
            host = String(hostPort[hostPort.index(after: hostPort.startIndex)..<close])
            let after = hostPort[hostPort.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("unexpected text after the IPv6 host") }
                portText = after.dropFirst()
            }
        } else if let colon = hostPort.lastIndex(of: ":") {
            host = try decode(hostPort[..<colon], "the host")
            portText = hostPort[hostPort.index(after: colon)...]
        } else if !hostPort.isEmpty {
            host = try decode(hostPort, "the host")
        }
        if host == "" { host = nil }
        var port: Int?
        if let portText, !portText.isEmpty {
            guard let p = Int(portText), (1...65535).contains(p) else {
                throw bad("the port '\(portText)' is not a number from 1 to 65535")
            }
            port = p
        }
        var database: String? = path.isEmpty ? nil : try decode(path, "the database")
        if let d = database, d.contains("/") { throw bad("the database name '\(d)' has a '/'") }
        var sslMode: SSLMode?
        var rootCert: String?
        var timeout: Int?
        for pair in query.split(separator: "&") where !pair.isEmpty {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let k = try decode(kv[0], "a parameter")
            let v = kv.count > 1 ? try decode(kv[1], "parameter \(k)") : ""
            switch k {
            case "sslmode":
                guard let m = Self.sslMode(v) else {
                    throw bad("sslmode '\(v)' is not one of disable, allow, prefer, require, verify-ca, verify-full")
                }
                sslMode = m
            case "host": host = v.isEmpty ? nil : v
            case "port":
                guard let p = Int(v), (1...65535).contains(p) else {
                    throw bad("the port '\(v)' is not a number from 1 to 65535")
                }
                port = p
            case "user": user = v.isEmpty ? nil : v
            case "password": password = v
            case "dbname": database = v.isEmpty ? nil : v
            case "sslrootcert": rootCert = v
            case "connect_timeout":
                guard let t = Int(v), t >= 1 else {
                    throw bad("connect_timeout '\(v)' is not a whole number of seconds from 1")
                }
                timeout = t
            case "application_name", "target_session_attrs": break
            default:
                throw bad(
                    "unknown parameter '\(k)' (cuff knows sslmode, host, port, user, password, dbname, sslrootcert, connect_timeout)"
                )
            }
        }
        if host == nil, let h = environment["PGHOST"], !h.isEmpty { host = h }
        if port == nil, let p = environment["PGPORT"].flatMap(Int.init), (1...65535).contains(p) { port = p }
        if sslMode == nil, let m = environment["PGSSLMODE"] {
            guard let mode = Self.sslMode(m) else { throw bad("PGSSLMODE '\(m)' is not an sslmode") }
            sslMode = mode
        }
        let login =
            environment["PGUSER"].flatMap { $0.isEmpty ? nil : $0 } ?? environment["USER"].flatMap {
                $0.isEmpty ? nil : $0
            } ?? Self.loginName()
        guard let u = user ?? login else { throw bad("no user: give one as postgres://USER@HOST/DB") }
        self.user = u
        self.database = database ?? environment["PGDATABASE"].flatMap { $0.isEmpty ? nil : $0 } ?? u
        self.port = port ?? 5432
        if let h = host, h.hasPrefix("/") {
            self.host = nil
            self.socketDirectory = h
        } else {
            self.host = host ?? "localhost"
            self.socketDirectory = nil
        }
        self.sslMode = sslMode ?? .prefer
        self.sslRootCert = rootCert
        self.connectTimeoutSeconds = timeout ?? 5
        if self.socketDirectory != nil, [.require, .verifyCA, .verifyFull].contains(self.sslMode) {
            throw bad("sslmode=\(self.sslMode.rawValue) asks for TLS, which a Unix socket does not carry")
        }
        if let password {
            self.password = password
            self.passwordSource = "url"
        } else if let p = environment["PGPASSWORD"] {
            self.password = p
            self.passwordSource = "PGPASSWORD"
        } else {
            let file =
                environment["PGPASSFILE"].flatMap { $0.isEmpty ? nil : $0 }
                ?? environment["HOME"].map { $0 + "/.pgpass" }
            if let file,
                let p = PassFile.lookup(
                    file: file, host: self.socketDirectory ?? self.host ?? "localhost", port: self.port,
                    database: self.database, user: u)
            {
                self.password = p
                self.passwordSource = file
            } else {
                self.password = nil
                self.passwordSource = nil
            }
        }
    }

    static func sslMode(_ s: String) -> SSLMode? {
        s == "allow" ? .prefer : SSLMode(rawValue: s)
    }

    static func loginName() -> String? {
        guard let pw = getpwuid(geteuid()), let n = pw.pointee.pw_name else { return nil }
        return String(cString: n)
    }

    static func escape(_ s: String) -> String {
        s.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? s
    }

    /// `text` with the password (between `//user:` and `@`, or `password=`) replaced by `***`.
    public static func redacting(_ text: String) -> String {
        var s = text
        if let scheme = s.range(of: "://") {
            let after = s[scheme.upperBound...]
            let end = after.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? after.endIndex
            if let at = after[..<end].lastIndex(of: "@"), let colon = after[..<at].firstIndex(of: ":") {
                s.replaceSubrange(s.index(after: colon)..<at, with: "***")
            }
        }
        if let r = s.range(of: "password=") {
            let end = s[r.upperBound...].firstIndex(of: "&") ?? s.endIndex
            s.replaceSubrange(r.upperBound..<end, with: "***")
        }
        return s
    }
}

/// A `~/.pgpass`-style file: `hostname:port:database:username:password` lines, `*` matching
/// anything, `\:` and `\\` escaped, `#` comments. As libpq, a file group or others can read is
/// ignored (with a warning).
public enum PassFile {
    /// The first matching line's password, or nil.
    public static func lookup(
        file: String, host: String, port: Int, database: String, user: String,
        warn: Logger = Logger(label: "warning")
    ) -> String? {
        guard case .success(let st) = Sys.fileStatus(file), st.st_mode & S_IFMT == S_IFREG else { return nil }
        if st.st_mode & 0o077 != 0 {
            warn.warning(
                "password file \(file) has group or world access; permissions should be u=rw (0600) or less; it is ignored"
            )
            return nil
        }
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { return nil }
        let wanted = [host, String(port), database, user]
        for line in text.split(whereSeparator: \.isNewline) {
            if line.hasPrefix("#") { continue }
            let fields = split(line)
            guard fields.count == 5 else { continue }
            var ok = true
            for i in 0..<4 where fields[i] != "*" && fields[i] != wanted[i] {
                // libpq: "localhost" also matches a connection over the default socket.
                if i == 0 && fields[i] == "localhost" && host.hasPrefix("/") { continue }
                ok = false
                break
            }
            if ok { return fields[4] }
        }
        return nil
    }

    static func split(_ line: Substring) -> [String] {
        var fields: [String] = []
        var cur = ""
        var escaped = false
        for c in line {
            if escaped {
                cur.append(c)
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else if c == ":" && fields.count < 4 {
                fields.append(cur)
                cur = ""
            } else {
                cur.append(c)
            }
        }
        fields.append(cur)
        return fields
    }
}
