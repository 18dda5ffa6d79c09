// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import Foundation
import Transport

/// `--publish mqtt://[USER[:PASSWORD]@]HOST[:PORT][/PREFIX]` or `mqtts://…` (TLS).
///
/// * Parts are percent-decoded; an IPv6 host is written in brackets (`mqtt://[::1]:1883`).
/// * The port defaults to 1883 (`mqtt://`) or 8883 (`mqtts://`); the topic prefix to `cuff`.
/// * The password: the URL's, else the first line of `--publish-password-file`, else
///   `CUFF_MQTT_PASSWORD` when the URL names a user (see ``resolvingPassword(file:environment:)``). It is never in
///   ``description``.
public struct MQTTURL: Sendable, Hashable, CustomStringConvertible {
    public var tls: Bool
    public var user: String?
    public var password: String?
    public var host: String
    public var port: Int
    /// The topics' first levels (`cuff`, or `home/cuff`), without slashes at either end.
    public var prefix: String
    /// The topic prefix of a URL without a path.
    public static let defaultPrefix = "cuff"

    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        public var url: String
        public var reason: String
        public var description: String { "bad MQTT URL \(url): \(reason)" }
    }

    /// The URL without its password, for messages and logs.
    public var description: String {
        var s = tls ? "mqtts://" : "mqtt://"
        if let user { s += Self.escape(user) + "@" }
        s += serverName + "/" + prefix
        return s
    }

    /// `HOST:PORT` (an IPv6 host in brackets).
    public var serverName: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }

    /// Whether the host is this machine (a loopback address or `localhost`): health data sent to
    /// any other host without TLS crosses a network in the clear.
    public var isLoopback: Bool { HostName.isThisMachine(host) }

    public init(parsing text: String) throws(ParseError) {
        let shown = Self.redacting(text)
        func bad(_ reason: String) -> ParseError { ParseError(url: shown, reason: reason) }
        let lower = text.lowercased()
        var rest: Substring
        if lower.hasPrefix("mqtt://") {
            tls = false
            rest = text.dropFirst("mqtt://".count)
        } else if lower.hasPrefix("mqtts://") {
            tls = true
            rest = text.dropFirst("mqtts://".count)
        } else {
            throw bad("it must start with mqtt:// or mqtts://")
        }
        var path = ""
        if let slash = rest.firstIndex(of: "/") {
            path = String(rest[rest.index(after: slash)...])
            rest = rest[..<slash]
        }
        if rest.contains("?") || path.contains("?") || path.contains("#") && !path.isEmpty {
            throw bad("it takes no query or fragment")
        }
        user = nil
        password = nil
        if let at = rest.lastIndex(of: "@") {
            let auth = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = auth.firstIndex(of: ":") {
                user = try Self.decode(auth[..<colon], bad)
                password = try Self.decode(auth[auth.index(after: colon)...], bad)
            } else {
                user = try Self.decode(auth, bad)
            }
            if user?.isEmpty == true { throw bad("the user name is empty") }
            // MQTT carries each in a 16-bit length (libmosquitto refuses a longer one).
            if (user?.utf8.count ?? 0) > 65535 { throw bad("the user name is longer than 65535 bytes") }
            if (password?.utf8.count ?? 0) > 65535 { throw bad("the password is longer than 65535 bytes") }
        }
        var portText: Substring? = nil
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw bad("an IPv6 address needs its closing ]") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("expected :PORT after the IPv6 address") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = try Self.decode(rest[..<colon], bad)
            portText = rest[rest.index(after: colon)...]
        } else {
            host = try Self.decode(rest, bad)
        }
        if host.isEmpty { throw bad("the host is missing") }
        if let portText {
            guard let p = Int(portText), (1...65535).contains(p) else {
                throw bad("the port must be a number from 1 to 65535, not '\(portText)'")
            }
            port = p
        } else {
            port = tls ? 8883 : 1883
        }
        let decoded = try Self.decode(Substring(path), bad).split(separator: "/", omittingEmptySubsequences: true)
            .joined(separator: "/")
        if let problem = MQTTTopics.problem(prefix: decoded) { throw bad("the topic prefix \(problem)") }
        prefix = decoded.isEmpty ? Self.defaultPrefix : decoded
    }

    /// The password when the URL has none: the first line of `file`, else `CUFF_MQTT_PASSWORD`.
    /// The variable is read only for a URL with a user name (a password alone is meaningless, and
    /// the variable, set for another target, must not refuse this one); a password file given for
    /// a URL without one is refused.
    public func resolvingPassword(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(ParseError) -> MQTTURL
    {
        guard password == nil, let file else { return try resolvingPassword(fromFile: nil, environment: environment) }
        let text: String
        do { text = try Self.readPasswordFile(file) } catch { throw ParseError(url: description, reason: error.reason) }
        return try resolvingPassword(fromFile: text, environment: environment)
    }

    /// ``resolvingPassword(file:environment:)`` with the file already read (``readPasswordFile(_:)``:
    /// a pipe can be read only once, however many URLs take its password).
    public func resolvingPassword(
        fromFile: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ParseError) -> MQTTURL {
        var u = self
        if u.password != nil { return u }
        if let fromFile {
            u.password = fromFile
        } else if u.user != nil, let p = environment["CUFF_MQTT_PASSWORD"], !p.isEmpty {
            u.password = p
        }
        if u.password != nil && u.user == nil {
            throw ParseError(url: description, reason: "a password needs a user name (mqtt://USER@HOST)")
        }
        return u
    }

    /// Why a password file gave no password.
    public struct PasswordFileError: Error, Sendable, Hashable, CustomStringConvertible {
        public var reason: String
        public var description: String { reason }
    }

    /// A password file's first line. Read as a stream, once, so a pipe (`<(pass show mqtt)`)
    /// serves as well as a file; no more than the longest password MQTT carries and its line end.
    public static func readPasswordFile(_ file: String) throws(PasswordFileError) -> String {
        let bytes: [UInt8]
        switch Sys.readFile(file, limit: 65537) {
        case .success(let b): bytes = b
        case .failure(let e): throw PasswordFileError(reason: "cannot read the password file \(file): \(e)")
        }
        var line = bytes.split(separator: 0x0A, maxSplits: 1, omittingEmptySubsequences: false).first ?? []
        // A file saved with CRLF line ends (a Windows editor): the CR ends the line too.
        if line.last == 0x0D { line = line.dropLast() }
        guard line.count <= 65535 else {
            throw PasswordFileError(reason: "the password file's first line is longer than 65535 bytes")
        }
        guard let text = String(bytes: line, encoding: .utf8) else {
            throw PasswordFileError(reason: "the password file's first line is not UTF-8")
        }
        return text
    }

    /// `text` with the password (between `user:` and `@`) replaced by `***`.
    public static func redacting(_ text: String) -> String {
        guard let scheme = text.range(of: "://") else { return text }
        let afterScheme = text[scheme.upperBound...]
        let authorityEnd = afterScheme.firstIndex(of: "/") ?? afterScheme.endIndex
        let authority = afterScheme[..<authorityEnd]
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else {
            return text
        }
        return String(text[..<authority.index(after: colon)]) + "***" + String(text[at...])
    }

    static func decode(_ s: Substring, _ bad: (String) -> ParseError) throws(ParseError) -> String {
        guard let d = String(s).removingPercentEncoding else { throw bad("bad percent-encoding in '\(s)'") }
        return d
    }

    static func escape(_ s: String) -> String {
        s.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? s
    }
}
