// SPDX-License-Identifier: GPL-2.0-or-later
import Crypto
import CuffCore
import Foundation
import Transport

#if canImport(Glibc)
    import Glibc
#endif

/// A store's key (`cuff key new PATH`, `--store-key-file PATH`): 32 random bytes, kept in a file as
/// 64 hex digits and a newline, readable by its owner only.
///
/// The key itself never touches a store. Each store has a random salt; HKDF-SHA256 of the key and
/// that salt gives three subkeys: one seals every row (AES-256-GCM), one makes the rows'
/// deduplication tags (HMAC-SHA256 of the dedup key, so duplicates are found without the values),
/// and one makes the store's key check (so a wrong key is told apart from damage).
// Unchecked: SymmetricKey (immutable once made) is not marked Sendable in swift-crypto 3.
public struct StoreKey: @unchecked Sendable {
    let material: SymmetricKey
    /// Where it was read from (for messages).
    public let path: String

    init(material: SymmetricKey, path: String) {
        self.material = material
        self.path = path
    }

    /// Writes a new random key to `path` (mode 0600, never over an existing file) and returns it.
    public static func create(path: String) throws(SinkError) -> StoreKey {
        let key = SymmetricKey(size: .bits256)
        let text = key.withUnsafeBytes { Hex.encode(contiguous: $0.assumingMemoryBound(to: UInt8.self)) } + "\n"
        let fd: CInt
        switch Sys.open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode: 0o600) {
        case .success(let d): fd = d
        case .failure(let e):
            throw .keyFile(
                path: path,
                reason: e.rawValue == EEXIST
                    ? "already exists; a key file is never overwritten (remove it first if you mean to)"
                    : "cannot create: \(e)")
        }
        // A key that could not be written whole is no key: the file this call made goes again
        // (probe X: a full disk left an empty file, which the next try refused to overwrite).
        var written = false
        defer {
            _ = Sys.close(fd)
            if !written { _ = Sys.unlink(path) }
        }
        if case .failure(let e) = Sys.fchmod(fd, 0o600) { throw .keyFile(path: path, reason: "fchmod 600: \(e)") }
        if let e = Sys.writeAll(fd, text) { throw .keyFile(path: path, reason: "write: \(e)") }
        if case .failure(let e) = Sys.fsync(fd) { throw .keyFile(path: path, reason: "fsync: \(e)") }
        written = true
        return StoreKey(material: key, path: path)
    }

    /// Reads the key at `path`: a regular file (not a symlink) that only its owner can read or
    /// write, holding 64 hex digits (and whitespace).
    public static func load(path: String) throws(SinkError) -> StoreKey {
        switch Sys.lstat(path) {
        case .failure(let e): throw .keyFile(path: path, reason: e.rawValue == ENOENT ? "no such file" : "\(e)")
        case .success(let st):
            let mode = UInt32(st.st_mode)
            guard mode & UInt32(S_IFMT) == UInt32(S_IFREG) else {
                throw .keyFile(path: path, reason: "is not a regular file (a symbolic link is refused)")
            }
            guard mode & 0o077 == 0 else {
                throw .keyFile(
                    path: path,
                    reason:
                        "has mode \(String(mode & 0o7777, radix: 8)); a key file must be readable by its owner only (chmod 600 \(path))"
                )
            }
        }
        let bytes: [UInt8]
        switch Sys.readFile(path, limit: 256) {
        case .success(let b): bytes = b
        case .failure(let e): throw .keyFile(path: path, reason: "cannot read: \(e)")
        }
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.utf8.count == 64, let raw = Hex.decode(text), raw.count == 32 else {
            throw .keyFile(path: path, reason: "is not a cuff key (64 hex digits, as `cuff key new` writes)")
        }
        return StoreKey(material: SymmetricKey(data: raw), path: path)
    }

    /// The subkeys for a store with this salt.
    func derive(salt: [UInt8]) -> StoreCrypto {
        func sub(_ info: String) -> SymmetricKey {
            HKDF<SHA256>.deriveKey(inputKeyMaterial: material, salt: salt, info: Array(info.utf8), outputByteCount: 32)
        }
        return StoreCrypto(
            seal: sub("cuff store v1: rows"), tag: sub("cuff store v1: dedup tags"),
            check: sub("cuff store v1: key check"))
    }
}

/// A store's subkeys (see ``StoreKey``).
// Unchecked: immutable keys (see StoreKey).
struct StoreCrypto: @unchecked Sendable {
    let seal: SymmetricKey
    let tag: SymmetricKey
    let check: SymmetricKey

    /// What the store keeps to recognise its key.
    var keyCheck: [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Array("cuff store key check".utf8), using: check))
    }

    /// The row's deduplication tag: HMAC-SHA256 of its dedup key.
    func tag(_ dedupKey: String) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Array(dedupKey.utf8), using: tag))
    }

    /// `plaintext` sealed with AES-256-GCM (nonce, ciphertext, tag), bound to the row's dedup tag.
    func seal(_ plaintext: [UInt8], tag: [UInt8]) throws -> [UInt8] {
        guard let combined = try AES.GCM.seal(plaintext, using: seal, authenticating: tag).combined else {
            throw CryptoKitError.incorrectParameterSize
        }
        return Array(combined)
    }

    /// The plaintext of a sealed row, or nil when it does not authenticate (changed, damaged, moved
    /// to another row, or sealed with another key).
    func open(_ sealed: [UInt8], tag: [UInt8]) -> [UInt8]? {
        guard let box = try? AES.GCM.SealedBox(combined: sealed),
            let plain = try? AES.GCM.open(box, using: seal, authenticating: tag)
        else {
            return nil
        }
        return Array(plain)
    }
}
