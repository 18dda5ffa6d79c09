// SPDX-License-Identifier: GPL-2.0-or-later

#if canImport(Glibc)
    import Glibc
#endif
import CuffCore

/// A file only its user may read (mode 0600, in directories of mode 0700), replaced whole:
/// written beside itself, synced, then renamed over the old one, so a reader never sees half of it.
/// The bond store and the GATT cache keep their state this way.
package enum PrivateFile {
    /// Writes `text` to `path`, creating missing directories; `what` names the file in errors.
    package static func replace(_ path: String, with text: String, what: String) throws(TransportError) {
        // (A relative path's directories are relative too: `a/b/f` makes `a`, then `a/b`.)
        var dir = path.hasPrefix("/") ? "/" : ""
        for part in path.split(separator: "/").dropLast() {
            dir += (dir.isEmpty || dir == "/" ? "" : "/") + part
            if case .failure(let e) = Sys.mkdir(dir, 0o700), e != .fileExists {
                throw TransportError.system("mkdir", "\(what) directory \(dir)", e)
            }
        }
        let tmp = path + ".tmp"
        let fd: CInt
        switch Sys.open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode: 0o600) {
        case .success(let f): fd = f
        case .failure(let e): throw TransportError.system("open", "\(what) \(tmp)", e)
        }
        defer { _ = Sys.close(fd) }
        if case .failure(let e) = Sys.fchmod(fd, 0o600) { throw TransportError.system("fchmod", "\(what) \(tmp)", e) }
        if let e = Sys.writeAll(fd, text) { throw TransportError.system("write", "\(what) \(tmp)", e) }
        if case .failure(let e) = Sys.fsync(fd) { throw TransportError.system("fsync", "\(what) \(tmp)", e) }
        if case .failure(let e) = Sys.rename(tmp, path) {
            throw TransportError.system("rename", "\(what) \(tmp) → \(path)", e)
        }
    }
}
