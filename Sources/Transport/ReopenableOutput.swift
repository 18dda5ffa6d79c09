// SPDX-License-Identifier: GPL-2.0-or-later

#if canImport(Glibc)
    import Glibc
#endif

/// A standard descriptor (stdout, stderr) that was redirected to a file, reopened by its path on
/// request: after logrotate renamed the file, SIGHUP makes the next line go to a new file at the
/// old name, as daemons do.
public struct ReopenableOutput: Sendable {
    public let fd: CInt
    /// The file's path when the descriptor was a regular file at start; nil otherwise (a
    /// terminal, a pipe, journald's socket: nothing to reopen).
    public let path: String?

    /// Looks at what `fd` is now.
    public init(fd: CInt) {
        self.fd = fd
        guard case .success(let st) = Sys.fstat(fd), st.st_mode & S_IFMT == S_IFREG
        else {
            path = nil
            return
        }
        var buffer = [CChar](repeating: 0, count: 4097)
        let n = buffer.withUnsafeMutableBufferPointer { system_readlink("/proc/self/fd/\(fd)", $0.baseAddress!, 4096) }
        guard n > 0 else {
            path = nil
            return
        }
        let link = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        path = link.hasPrefix("/") && !link.hasSuffix(" (deleted)") ? link : nil
    }

    /// Opens the path again (appending; created with mode 0600) and puts it in place of the
    /// descriptor. Returns nil, or what failed.
    public func reopen() -> String? {
        guard let path else { return nil }
        switch Sys.open(path, O_WRONLY | O_APPEND | O_CREAT, mode: 0o600) {
        case .failure(let e):
            return "cannot reopen \(path): \(e)"
        case .success(let new):
            defer { _ = Sys.close(new) }
            if case .failure(let e) = Sys.duplicate(new, as: fd) {
                return "cannot reopen \(path): dup2: \(e)"
            }
            return nil
        }
    }
}
