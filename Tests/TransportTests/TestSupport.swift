// SPDX-License-Identifier: GPL-2.0-or-later

import Dispatch
import Glibc
import Synchronization

/// Runs `body` on another thread; `join` waits for it at most `limit` (nil if it didn't finish,
/// so a bug fails the test instead of hanging it).
final class Background<T: Sendable>: Sendable {
    private let result = Mutex<T?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () -> T) {
        Thread.detach { [self] in
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
    }

    func join(limit: Duration = .seconds(10)) -> T? {
        let ns = UInt64(limit.components.seconds) * 1_000_000_000
        guard done.wait(timeout: .now() + .nanoseconds(Int(ns))) == .success else { return nil }
        return result.withLock { $0 }
    }
}

enum Thread {
    static func detach(_ body: @escaping @Sendable () -> Void) {
        DispatchQueue.global().async(execute: body)
    }
}

/// A fresh private directory under $TMPDIR (or /tmp); removed by `remove()`.
struct TemporaryDirectory {
    let path: String
    init() {
        var template = Array("\(String(cString: getenv("TMPDIR") ?? strdup("/tmp")))/cuff-test-XXXXXX".utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        path = String(cString: p!)
    }
    func remove() {
        if let dir = opendir(path) {
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
                if name != "." && name != ".." { unlink(path + "/" + name) }
            }
            closedir(dir)
        }
        rmdir(path)
    }
}
