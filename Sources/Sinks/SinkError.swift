// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import Transport

#if canImport(Glibc)
    import Glibc
#endif

/// Why a sink could not take, keep or give back a result — naming what failed and where.
public enum SinkError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Writing to a line output (stdout, a file descriptor) failed with `errno`.
    case writeFailed(destination: String, errno: Int32)
    /// `write` or `finish` was called after `finish`.
    case finished(sink: String)
    /// `--format` named something that is not `ndjson`, `fhir` or `omh`.
    case unknownFormat(String)
    /// The store file could not be created, opened, or migrated.
    case storeOpen(path: String, reason: String)
    /// An MQTT broker (`--publish URL`, the password never in it) refused the connection or could not
    /// be verified: a wrong password, a certificate that does not verify, a peer that is not a broker.
    case publishRefused(url: String, reason: String)
    /// The store file is readable or writable by group or others (its mode is given), or is not a regular file.
    case insecureStoreFile(path: String, mode: UInt32)
    /// A measurement could not be stored.
    case storeWrite(path: String, dedupKey: String, reason: String)
    /// Stored rows could not be read.
    case storeRead(path: String, reason: String)
    /// A stored row's raw bytes no longer decode with the BloodPressure codec (or name an unknown characteristic).
    case storedValueUndecodable(path: String, rowID: Int64, reason: String)

    /// A key file could not be created or read, or is not safe to use (its mode, a symlink).
    case keyFile(path: String, reason: String)
    /// The store and the key do not go together: the store is encrypted and no key was given, the
    /// key is not the store's, or a key was given for a store that is not encrypted.
    case storeKey(path: String, reason: String)
    /// A sealed row does not authenticate: the file was changed or damaged.
    case storeTampered(path: String, rowID: Int64)

    /// A write to a pipe or socket whose reader has gone (EPIPE): `cuff … | head -1`.
    public var isBrokenPipe: Bool {
        if case let .writeFailed(_, e) = self { e == EPIPE } else { false }
    }

    public var description: String {
        switch self {
        case let .writeFailed(d, e): "cannot write to \(d): \(Errno(rawValue: e))"
        case let .finished(s): "\(s): write after finish"
        case let .unknownFormat(f): "unknown output format \"\(f)\" (expected ndjson, fhir or omh)"
        case let .storeOpen(p, r): "cannot open store \(p): \(r)"
        case let .publishRefused(u, r): "cannot publish to \(u): \(r)"
        // (Probe U: a directory was told to chmod 600, which only makes it unusable.)
        case let .insecureStoreFile(p, m) where m & UInt32(S_IFMT) == UInt32(S_IFDIR):
            "store \(p) is a directory; give the path of a store file (e.g. \(p)/bp.sqlite)"
        case let .insecureStoreFile(p, m) where m & UInt32(S_IFMT) != UInt32(S_IFREG):
            "store \(p) is not a regular file; give the path of a store file"
        case let .insecureStoreFile(p, m):
            "store \(p) has mode \(String(m & 0o7777, radix: 8)); it must be readable and writable by its owner only (chmod 600 \(p))"
        // Not the dedup key: it holds the reading's values, and messages go to logs.
        case let .storeWrite(p, _, r): "cannot store a measurement in \(p): \(r)"
        case let .storeRead(p, r): "cannot read store \(p): \(r)"
        case let .storedValueUndecodable(p, id, r): "store \(p), measurement row \(id): raw value does not decode: \(r)"
        case let .keyFile(p, r): r.hasPrefix("is ") ? "key file \(p) \(r)" : "key file \(p): \(r)"
        case let .storeKey(p, r): "store \(p): \(r)"
        case let .storeTampered(p, id):
            "store \(p), measurement row \(id) does not authenticate: the file was changed or damaged (nothing of it was read)"
        }
    }
}
