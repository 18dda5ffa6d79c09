// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
    import CuffLogging
    import Glibc
#endif
import CuffCore
import CuffSession
import Logging
import Transport

/// The GATT cache on disk: one file per cuff (``LearnedCuff``, what a session learned about it),
/// in a `gatt` directory next to the bond store: beside `--bonds PATH`, else
/// `$XDG_STATE_HOME/cuff/gatt`, else `~/.local/state/cuff/gatt`. Files are private (0600) and
/// replaced whole. The I/O edge of the cache: sessions get and give values (``session(_:)``,
/// ``keep(_:)``), and never touch the files.
public struct GATTCacheStore: Sendable {
    public let directory: String

    public init(directory: String) { self.directory = directory }

    /// The cache's directory: `gatt` beside the bond store `bonds` (`--bonds PATH`), else in
    /// `$XDG_STATE_HOME/cuff`, else in `~/.local/state/cuff`.
    public static func defaultDirectory(
        bonds: String? = nil, environment: (String) -> String? = { getenv($0).map { String(cString: $0) } }
    ) -> String {
        if let bonds, let slash = bonds.lastIndex(of: "/") {
            let dir = bonds[..<slash]
            return (dir.isEmpty ? "" : String(dir)) + "/gatt"
        }
        if bonds != nil { return "gatt" }
        return StateDirectory.cuff(environment: environment) + "/gatt"
    }

    /// The file of the cuff at `address`: its address made a file name (readable, bounded) and a
    /// 64-bit FNV-1a of the whole address, so two addresses never share a file.
    public func path(address: String) -> String {
        var slug = ""
        for u in address.unicodeScalars.prefix(80) {
            slug.unicodeScalars.append(
                u.isASCII && (u.properties.isAlphabetic || u.properties.numericType != nil || u == "-" || u == ".")
                    ? u : "_")
        }
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in address.utf8 { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
        return directory + "/" + slug + "-" + Hex.encode(withUnsafeBytes(of: h.bigEndian) { Array($0) }) + ".gatt"
    }

    /// What is kept for `address`; nil when nothing is. A file that cannot be read or parsed (or
    /// that names another address) is reported through `log` and treated as absent: the session
    /// discovers and the file is rewritten.
    public func load(address: String, log: Logger = .silent) -> LearnedCuff? {
        let p = path(address: address)
        switch Sys.readFile(p, limit: 1 << 16, regularFileOnly: true) {
        case .failure(.noSuchFileOrDirectory):
            return nil
        case .failure(.invalidArgument):
            log.info("GATT cache: \(p) is not a regular file; discovering")
            return nil
        case .failure(let e):
            log.info("GATT cache: cannot read \(p): \(e); discovering")
            return nil
        case .success(let bytes):
            do {
                let learned = try LearnedCuff(parsing: String(decoding: bytes, as: UTF8.self))
                guard learned.address == address else {
                    log.info("GATT cache: \(p) is for \(learned.address), not \(address); discovering")
                    return nil
                }
                return learned
            } catch {
                log.info("GATT cache: \(p): \(error); discovering")
                return nil
            }
        }
    }

    /// Keeps `learned`, replacing what was kept for its address.
    public func save(_ learned: LearnedCuff) throws(TransportError) {
        try PrivateFile.replace(path(address: learned.address), with: learned.encoded, what: "GATT cache")
    }

    /// Forgets what was kept for `address`.
    public func remove(address: String) {
        _ = Sys.unlink(path(address: address))
    }

    /// `configuration` with the cache on and what is kept for its address.
    public func session(_ configuration: CuffSessionConfiguration, log: Logger = .silent) -> CuffSessionConfiguration {
        var c = configuration
        c.gattCache = .on(load(address: c.address, log: log))
        return c
    }

    /// After a session: keeps what it learned when that differs from what was kept (`before`),
    /// and forgets an entry the session found stale without learning a new one. Returns what is
    /// kept now.
    @discardableResult
    public func keep(_ central: ProtocolSession, before: LearnedCuff?, address: String, log: Logger = .silent)
        -> LearnedCuff?
    {
        // A session that got nothing and ended as a database that is no cuff's explains (no
        // service, nothing answered on the handles, a protocol error) neither keeps what it
        // learned nor the entry it used: a peer that was no cuff must not hold the address for
        // the cuff that comes next; the next session discovers.
        if central.measurements == 0, let o = central.outcome,
            o == .serviceMissing || o == .timedOut || o == .protocolError
        {
            if before != nil {
                remove(address: address)
                log.info("GATT cache: the session got nothing (\(o.rawValue)); the entry is dropped")
            }
            return nil
        }
        if let learned = central.learned {
            guard learned != before else { return before }
            do { try save(learned) } catch { log.info("GATT cache: \(error.message)") }
            return learned
        }
        if central.gattCache == .stale {
            remove(address: address)
            return nil
        }
        return before
    }

    /// The store `cuff measure` and `cuff watch` use: none with `--no-gatt-cache` (`disabled`),
    /// else the one beside the bond store `bonds` (``defaultDirectory(bonds:environment:)``).
    public static func unless(disabled: Bool, bonds: String? = nil) -> GATTCacheStore? {
        disabled ? nil : GATTCacheStore(directory: defaultDirectory(bonds: bonds))
    }
}
