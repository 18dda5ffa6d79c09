// SPDX-License-Identifier: GPL-2.0-or-later

#if canImport(Glibc)
    import Glibc
#endif
import CuffCore

/// Builds a `sockaddr_un` for a file-system path, refusing paths that don't fit.
package enum UnixSocketAddress {
    /// Longest path `sun_path` holds (108 bytes including the terminating NUL).
    package static let maxPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    package static func make(_ path: String, call: String) throws(TransportError) -> sockaddr_un {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty else {
            throw TransportError(
                .systemCall, "\(call)(unix:): empty socket path — give a path, e.g. unix:/tmp/cuff.sock")
        }
        guard !bytes.contains(0) else {
            throw TransportError(.systemCall, "\(call)(unix:\(path)): the path contains a NUL byte")
        }
        guard bytes.count <= maxPathBytes else {
            throw TransportError(
                .systemCall,
                "\(call)(unix:\(path)): path is \(bytes.count) bytes, Unix sockets allow \(maxPathBytes) — use a shorter path",
                errno: ENAMETOOLONG)
        }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        return addr
    }
}
