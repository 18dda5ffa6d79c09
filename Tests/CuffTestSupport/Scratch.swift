// SPDX-License-Identifier: GPL-2.0-or-later

import Dispatch
import Foundation
import Synchronization

/// A fresh private directory under /tmp (short: a socket path must fit in 108 bytes), removed with
/// everything in it when the value goes (or by `remove()`).
public final class ScratchDirectory: @unchecked Sendable {
    public let dir: URL
    /// The directory's path.
    public var root: String { dir.path }

    public init(prefix: String = "cuff") throws {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        dir = URL(fileURLWithPath: String(cString: p))
    }

    deinit { remove() }

    public func remove() { try? FileManager.default.removeItem(at: dir) }

    /// The path of `name` in the directory.
    public func path(_ name: String) -> String { dir.appendingPathComponent(name).path }
    /// The text of file `name`, "" when there is none.
    public func text(_ name: String) -> String { (try? String(contentsOfFile: path(name), encoding: .utf8)) ?? "" }
    public func lines(_ name: String) -> [String] { text(name).split(separator: "\n").map(String.init) }
}

/// A file name in the temporary directory, unique to this process and `name`.
public func temporaryPath(_ name: String) -> String {
    NSTemporaryDirectory() + "cuff-test-\(getpid())-\(name)"
}

/// Polls `condition` every 50 ms for up to `seconds`; its last answer.
public func waitUntil(_ seconds: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(50_000)
    }
    return condition()
}

/// Runs `body` on another thread; `join` waits for it at most `limit` (nil if it didn't finish,
/// so a bug fails the test instead of hanging it).
public final class Background<T: Sendable>: Sendable {
    private let result = Mutex<T?>(nil)
    private let done = DispatchSemaphore(value: 0)

    public init(_ body: @escaping @Sendable () -> T) {
        DispatchQueue.global().async { [self] in
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
    }

    public func join(limit: Duration = .seconds(10)) -> T? {
        let ns = UInt64(limit.components.seconds) * 1_000_000_000
        guard done.wait(timeout: .now() + .nanoseconds(Int(ns))) == .success else { return nil }
        return result.withLock { $0 }
    }
}
