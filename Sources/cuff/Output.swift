// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// stdout carries data only (one JSON object per line); everything for humans goes to stderr.
enum Output {
    /// One line of data on stdout (libc-buffered; flushed by ``flush()``).
    static func line(_ s: String) {
        print(s)
    }

    static func flush() { fflush(nil) }

    /// One line for humans on stderr (unbuffered).
    static func log(_ s: String) {
        writeAll(2, s + "\n")
    }

    /// Text on stderr without a newline (for the live gauge).
    static func raw(_ s: String) { writeAll(2, s) }

    static func writeAll(_ fd: Int32, _ s: String) {
        var s = s
        s.withUTF8 { buf in
            var off = 0
            while off < buf.count {
                let n = write(fd, buf.baseAddress! + off, buf.count - off)
                if n < 0 {
                    if errno == EINTR { continue }
                    return
                }
                off += n
            }
        }
    }

    static var stderrIsTerminal: Bool { isatty(2) != 0 }
}
