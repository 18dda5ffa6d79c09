// SPDX-License-Identifier: GPL-2.0-or-later

#if canImport(Glibc)
    import Glibc
#endif
import CEpoll
internal import SystemPackage

/// Typed wrappers over the `system_*` shims and, for files (open, read, write, seek, stat, dup2,
/// pipe, close), over swift-system's `FileDescriptor` and `FilePath`: `Result<_, Errno>`, EINTR
/// retried where right.
///
/// Following swift-system, each function documents `retryOnInterrupt` and names its C function.
/// Package access: Transport and BlueZ use these; the public API is the bearers.
package enum Sys {
    /// Runs `call` until it succeeds or fails with something other than EINTR (when retrying).
    @inline(__always)
    package static func valueOrErrno<I: FixedWidthInteger>(
        retryOnInterrupt: Bool, _ call: () -> I
    ) -> Result<I, Errno> {
        while true {
            let r = call()
            if r != -1 { return .success(r) }
            let e = Errno.current
            if retryOnInterrupt && e == .interrupted { continue }
            return .failure(e)
        }
    }

    /// Makes a swift-system call (one made with `retryOnInterrupt: false`) until it succeeds or
    /// fails with something other than EINTR (when retrying), as ``valueOrErrno(retryOnInterrupt:_:)``
    /// does for the shims, so the EINTR policy stays ours. Its `SystemPackage.Errno` becomes an
    /// ``Errno`` of the same code. In debug builds the mock table may stand in for each attempt,
    /// under the C function's `name` and `arguments`, as in every shim: a scripted failure fails,
    /// a scripted value becomes the result through `mocked`.
    @inline(__always)
    static func retrying<T>(
        _ name: StaticString, _ arguments: @autoclosure () -> [Int], retryOnInterrupt: Bool, mocked: (Int) -> T,
        _ call: () throws -> T
    ) -> Result<T, Errno> {
        while true {
            let result: Result<T, Errno>
            #if ENABLE_MOCKING
                if let r = mockedResult("\(name)", arguments()) {
                    result = r == -1 ? .failure(.current) : .success(mocked(r))
                } else {
                    result = attempt(call)
                }
            #else
                result = attempt(call)
            #endif
            // (`==`, not a `case .failure(.interrupted)` pattern: in a file that imports
            // SystemPackage, that pattern would take its `Errno ~= Error` and never match ours.)
            if retryOnInterrupt, case .failure(let e) = result, e == .interrupted { continue }
            return result
        }
    }

    @inline(__always)
    private static func attempt<T>(_ call: () throws -> T) -> Result<T, Errno> {
        do {
            return .success(try call())
        } catch {
            // swift-system throws only its Errno.
            return .failure(Errno(rawValue: (error as? SystemPackage.Errno)?.rawValue ?? EIO))
        }
    }

    /// Creates a socket. The corresponding C function is `socket`.
    package static func socket(domain: CInt, type: CInt, protocol proto: CInt = 0) -> Result<CInt, Errno> {
        valueOrErrno(retryOnInterrupt: true) { system_socket(domain, type, proto) }
    }

    /// Creates a connected pair of sockets. The corresponding C function is `socketpair`.
    package static func socketpair(domain: CInt, type: CInt, protocol proto: CInt = 0) -> Result<(CInt, CInt), Errno> {
        var fds: [CInt] = [-1, -1]
        return fds.withUnsafeMutableBufferPointer { p in
            valueOrErrno(retryOnInterrupt: true) { system_socketpair(domain, type, proto, p.baseAddress!) }
                .map { _ in (p[0], p[1]) }
        }
    }

    /// Binds `fd` to the socket address `address` (any `sockaddr_*` struct, passed whole, with
    /// C's size including tail padding). The corresponding C function is `bind`.
    package static func bind<A>(_ fd: CInt, _ address: A) -> Result<Void, Errno> {
        withSocketAddress(address) { sa, len in
            valueOrErrno(retryOnInterrupt: true) { system_bind(fd, sa, len) }.map { _ in () }
        }
    }

    /// Connects `fd` to `address`.
    ///
    /// - Parameter retryOnInterrupt: retry on EINTR. Right for AF_UNIX (the call has no effect when
    ///   interrupted); wrong for sockets whose connect continues in the background.
    /// The corresponding C function is `connect`.
    package static func connect<A>(_ fd: CInt, _ address: A, retryOnInterrupt: Bool = true) -> Result<Void, Errno> {
        withSocketAddress(address) { sa, len in
            valueOrErrno(retryOnInterrupt: retryOnInterrupt) { system_connect(fd, sa, len) }.map { _ in () }
        }
    }

    /// Copies `address` into zeroed storage of its stride (C's `sizeof`, tail padding included).
    private static func withSocketAddress<A, R>(_ address: A, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        let length = MemoryLayout<A>.stride
        let storage = UnsafeMutableRawPointer.allocate(
            byteCount: max(length, MemoryLayout<sockaddr>.size), alignment: 8)
        defer { storage.deallocate() }
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: max(length, MemoryLayout<sockaddr>.size))
        withUnsafeBytes(of: address) { storage.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        return body(storage.assumingMemoryBound(to: sockaddr.self), socklen_t(length))
    }

    /// Marks `fd` as listening. The corresponding C function is `listen`.
    package static func listen(_ fd: CInt, backlog: CInt) -> Result<Void, Errno> {
        valueOrErrno(retryOnInterrupt: true) { system_listen(fd, backlog) }.map { _ in () }
    }

    /// Accepts a connection; the new descriptor is close-on-exec.
    /// The corresponding C functions are `accept` and `fcntl(F_SETFD)`.
    package static func accept(_ fd: CInt, retryOnInterrupt: Bool = true) -> Result<CInt, Errno> {
        valueOrErrno(retryOnInterrupt: retryOnInterrupt) { system_accept(fd, nil, nil) }.map(setCloseOnExec)
    }

    /// Accepts a connection and reports the peer's address as an `A` (e.g. `sockaddr_l2`); the new
    /// descriptor is close-on-exec. The corresponding C functions are `accept` and `fcntl(F_SETFD)`.
    package static func accept<A>(_ fd: CInt, peer: inout A, retryOnInterrupt: Bool = true) -> Result<CInt, Errno> {
        withUnsafeMutableBytes(of: &peer) { raw in
            let sa = raw.baseAddress!.assumingMemoryBound(to: sockaddr.self)
            var len = socklen_t(raw.count)
            return valueOrErrno(retryOnInterrupt: retryOnInterrupt) { system_accept(fd, sa, &len) }
        }.map(setCloseOnExec)
    }

    private static func setCloseOnExec(_ fd: CInt) -> CInt {
        _ = valueOrErrno(retryOnInterrupt: true) { system_fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return fd
    }

    /// Sets or clears `O_NONBLOCK`. The corresponding C function is `fcntl(F_SETFL)`.
    package static func setNonBlocking(_ fd: CInt, _ on: Bool) -> Result<Void, Errno> {
        valueOrErrno(retryOnInterrupt: true) { system_fcntl(fd, F_GETFL, 0) }.flatMap { flags in
            let new = on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK
            return valueOrErrno(retryOnInterrupt: true) { system_fcntl(fd, F_SETFL, new) }.map { _ in () }
        }
    }

    /// Sends the bytes of `buffer` as one record. The corresponding C function is `send`.
    package static func send(_ fd: CInt, _ buffer: UnsafeRawBufferPointer, flags: CInt, retryOnInterrupt: Bool = true)
        -> Result<Int, Errno>
    {
        valueOrErrno(retryOnInterrupt: retryOnInterrupt) { system_send(fd, buffer.baseAddress, buffer.count, flags) }
    }

    /// Receives into `buffer`; returns the byte count (or, with `MSG_TRUNC`, the record's real
    /// length). The corresponding C function is `recv`.
    package static func recv(
        _ fd: CInt, _ buffer: UnsafeMutableRawBufferPointer, flags: CInt, retryOnInterrupt: Bool = true
    ) -> Result<Int, Errno> {
        valueOrErrno(retryOnInterrupt: retryOnInterrupt) { system_recv(fd, buffer.baseAddress, buffer.count, flags) }
    }

    /// Waits for `events` on one descriptor; returns the `revents` (0 on timeout).
    ///
    /// - Parameter timeoutMS: milliseconds, -1 for no limit.
    /// - Parameter retryOnInterrupt: usually false: a signal should wake the waiter, so drivers
    ///   can check their stop flags.
    /// The corresponding C function is `poll`.
    package static func poll(_ fd: CInt, events: Int16, timeoutMS: CInt, retryOnInterrupt: Bool = false) -> Result<
        Int16, Errno
    > {
        var p = pollfd(fd: fd, events: events, revents: 0)
        return valueOrErrno(retryOnInterrupt: retryOnInterrupt) { system_poll(&p, 1, timeoutMS) }
            .map { n in n == 0 ? 0 : p.revents }
    }

    /// Waits on several descriptors; fills in their `revents`; returns how many are ready.
    /// The corresponding C function is `poll`.
    package static func poll(_ fds: inout [pollfd], timeoutMS: CInt, retryOnInterrupt: Bool = false) -> Result<
        Int, Errno
    > {
        fds.withUnsafeMutableBufferPointer { p in
            valueOrErrno(retryOnInterrupt: retryOnInterrupt) { system_poll(p.baseAddress!, nfds_t(p.count), timeoutMS) }
                .map(Int.init)
        }
    }

    /// A new epoll instance (close-on-exec). The corresponding C function is `epoll_create1`.
    package static func epollCreate() -> Result<CInt, Errno> {
        valueOrErrno(retryOnInterrupt: true) { system_epoll_create1() }
    }

    /// Adds (1), removes (2) or changes (3) `fd`'s interest, with `data.fd = fd`.
    /// The corresponding C function is `epoll_ctl`.
    package static func epollControl(_ epfd: CInt, _ op: CInt, _ fd: CInt, events: UInt32) -> Result<Void, Errno> {
        valueOrErrno(retryOnInterrupt: true) { system_epoll_ctl(epfd, op, fd, events) }.map { _ in () }
    }

    /// Waits for events; fills `fds` and `events` from the start; returns how many. Not retried on
    /// EINTR, so a signal wakes the loop. The corresponding C function is `epoll_wait`.
    package static func epollWait(_ epfd: CInt, fds: inout [CInt], events: inout [UInt32], timeoutMS: CInt) -> Result<
        Int, Errno
    > {
        let max = CInt(min(fds.count, events.count))
        return fds.withUnsafeMutableBufferPointer { f in
            events.withUnsafeMutableBufferPointer { e in
                valueOrErrno(retryOnInterrupt: false) {
                    system_epoll_wait(epfd, f.baseAddress!, e.baseAddress!, max, timeoutMS)
                }.map(Int.init)
            }
        }
    }

    /// Sets a socket option from the bytes of `value`. The corresponding C function is `setsockopt`.
    /// The option is passed with C's size (the struct's stride, tail padding zeroed).
    package static func setsockopt<T>(_ fd: CInt, level: CInt, name: CInt, _ value: T) -> Result<Void, Errno> {
        var storage = [UInt8](repeating: 0, count: MemoryLayout<T>.stride)
        withUnsafeBytes(of: value) { raw in
            for i in 0..<raw.count { storage[i] = raw[i] }
        }
        return storage.withUnsafeBytes { raw in
            valueOrErrno(retryOnInterrupt: true) {
                system_setsockopt(fd, level, name, raw.baseAddress, socklen_t(raw.count))
            }.map { _ in () }
        }
    }

    /// Reads a socket option into a `T` (starting from `initial`). The corresponding C function is `getsockopt`.
    package static func getsockopt<T>(_ fd: CInt, level: CInt, name: CInt, initial: T) -> Result<T, Errno> {
        var value = initial
        let r: Result<CInt, Errno> = withUnsafeMutableBytes(of: &value) { raw in
            var len = socklen_t(raw.count)
            return valueOrErrno(retryOnInterrupt: true) { system_getsockopt(fd, level, name, raw.baseAddress, &len) }
        }
        return r.map { _ in value }
    }

    /// The pending error on a socket (`SO_ERROR`), nil when none. Reading it clears it.
    package static func socketError(_ fd: CInt) -> Errno? {
        switch getsockopt(fd, level: SOL_SOCKET, name: SO_ERROR, initial: CInt(0)) {
        case .success(let e): e == 0 ? nil : Errno(rawValue: e)
        case .failure: nil
        }
    }

    /// Shuts a socket down in one or both directions. The corresponding C function is `shutdown`.
    package static func shutdown(_ fd: CInt, how: CInt) -> Result<Void, Errno> {
        valueOrErrno(retryOnInterrupt: true) { system_shutdown(fd, how) }.map { _ in () }
    }

    /// Whether this process may read (`R_OK`) or write (`W_OK`) the file at `path`, without
    /// opening it. The corresponding C function is `access`.
    package static func access(_ path: String, _ mode: CInt) -> Result<Void, Errno> {
        valueOrErrno(retryOnInterrupt: true) { Glibc.access(path, mode) }.map { _ in () }
    }

    /// Takes, changes or drops an advisory lock on a whole open file (`LOCK_SH`, `LOCK_EX`,
    /// `LOCK_UN`, with `LOCK_NB` not to wait). The corresponding C function is `flock`.
    package static func flock(_ fd: CInt, _ operation: CInt) -> Result<Void, Errno> {
        valueOrErrno(retryOnInterrupt: true) { cuff_flock(fd, operation) }.map { _ in () }
    }

    /// Closes a descriptor. Never retried: on Linux the descriptor is gone even when EINTR is
    /// reported. The corresponding C function is `close`.
    package static func close(_ fd: CInt) -> Result<Void, Errno> {
        retrying("close", [Int(fd)], retryOnInterrupt: false, mocked: { _ in }) {
            try FileDescriptor(rawValue: fd).close()
        }
    }

    /// Removes a name from the file system. The corresponding C function is `unlink`.
    package static func unlink(_ path: String) -> Result<Void, Errno> {
        valueOrErrno(retryOnInterrupt: true) { system_unlink(path) }.map { _ in () }
    }

    /// File status, following symbolic links. The corresponding C function is `stat`.
    package static func fileStatus(_ path: String) -> Result<stat, Errno> {
        retrying("stat", [], retryOnInterrupt: true, mocked: { _ in stat() }) {
            try FilePath(path).stat(retryOnInterrupt: false).rawValue
        }
    }

    /// File status without following a final symbolic link. The corresponding C function is `lstat`.
    package static func lstat(_ path: String) -> Result<stat, Errno> {
        retrying("lstat", [], retryOnInterrupt: true, mocked: { _ in stat() }) {
            try FilePath(path).stat(followTargetSymlink: false, retryOnInterrupt: false).rawValue
        }
    }

    /// Sleeps for `duration` (at least 0), once: a signal ends it early (`.interrupted`), so a
    /// caller that sleeps in slices sees its signal flags. The corresponding C function is `nanosleep`.
    @discardableResult
    package static func sleep(_ duration: Duration) -> Errno? {
        let ns = max(0, duration.nanoseconds)
        var ts = timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
        if case .failure(let e) = valueOrErrno(retryOnInterrupt: false, { system_nanosleep(&ts, nil) }) { return e }
        return nil
    }

    /// Whether `fd` is a terminal. The corresponding C function is `isatty`.
    package static func isTerminal(_ fd: CInt) -> Bool { system_isatty(fd) == 1 }

    /// Ignores `signal` from now on (`SIGPIPE`: a closed reader becomes `EPIPE`). The corresponding
    /// C function is `signal`.
    package static func ignore(signal: CInt) { _ = Glibc.signal(signal, SIG_IGN) }

    /// Writes out C stdio's buffers (what SQLite or a library printed with `printf`). The
    /// corresponding C function is `fflush(NULL)`.
    package static func flushStandardIO() { _ = fflush(nil) }

    /// The host zone's broken-down time at `unixSeconds`, or nil. The corresponding C function is `localtime_r`.
    package static func localTime(_ unixSeconds: Int64) -> tm? {
        var t = time_t(unixSeconds)
        var out = tm()
        return localtime_r(&t, &out) != nil ? out : nil
    }

    /// Opens (or, with `O_CREAT`, creates with `mode`) a file; `O_CLOEXEC` is always added.
    /// The corresponding C function is `open`.
    package static func open(_ path: String, _ flags: CInt, mode: mode_t = 0) -> Result<CInt, Errno> {
        let flags = flags | O_CLOEXEC
        return retrying("open", [Int(flags), Int(mode)], retryOnInterrupt: true, mocked: { CInt($0) }) {
            try FileDescriptor.open(
                FilePath(path), FileDescriptor.AccessMode(rawValue: flags & O_ACCMODE),
                options: FileDescriptor.OpenOptions(rawValue: flags & ~O_ACCMODE),
                permissions: flags & O_CREAT != 0 ? FilePermissions(rawValue: mode) : nil, retryOnInterrupt: false
            ).rawValue
        }
    }

    /// Reads at most `buffer.count` bytes; 0 at the end of the file. The corresponding C function is `read`.
    package static func read(_ fd: CInt, into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, Errno> {
        retrying("read", [Int(fd), buffer.count], retryOnInterrupt: true, mocked: { $0 }) {
            try FileDescriptor(rawValue: fd).read(into: buffer, retryOnInterrupt: false)
        }
    }

    /// Writes at most `buffer.count` bytes; returns how many went. The corresponding C function is `write`.
    package static func write(_ fd: CInt, _ buffer: UnsafeRawBufferPointer) -> Result<Int, Errno> {
        retrying("write", [Int(fd), buffer.count], retryOnInterrupt: true, mocked: { $0 }) {
            try FileDescriptor(rawValue: fd).write(buffer, retryOnInterrupt: false)
        }
    }

    /// Makes `target` another descriptor of what `fd` is open on (`target` is closed first if it
    /// was open). The corresponding C function is `dup2`.
    package static func duplicate(_ fd: CInt, as target: CInt) -> Result<Void, Errno> {
        retrying("dup2", [Int(fd), Int(target)], retryOnInterrupt: true, mocked: { _ in }) {
            _ = try FileDescriptor(rawValue: fd).duplicate(
                as: FileDescriptor(rawValue: target), retryOnInterrupt: false)
        }
    }

    /// A new pipe, both ends close-on-exec: the descriptor to read from and the one to write to.
    /// The corresponding C function is `pipe2(O_CLOEXEC)`.
    package static func pipe() -> Result<(read: CInt, write: CInt), Errno> {
        retrying("pipe2", [], retryOnInterrupt: true, mocked: { _ in (-1, -1) }) {
            let p = try FileDescriptor.pipe(options: .closeOnExec)
            return (p.readEnd.rawValue, p.writeEnd.rawValue)
        }
    }

    /// Moves a file's position to `offset` from its start. The corresponding C function is `lseek`.
    package static func seek(_ fd: CInt, to offset: Int64) -> Result<Void, Errno> {
        retrying("lseek", [Int(fd), Int(offset), Int(SEEK_SET)], retryOnInterrupt: true, mocked: { _ in }) {
            _ = try FileDescriptor(rawValue: fd).seek(offset: offset, from: .start)
        }
    }

    /// The status of an open file. The corresponding C function is `fstat`.
    package static func fstat(_ fd: CInt) -> Result<stat, Errno> {
        retrying("fstat", [Int(fd)], retryOnInterrupt: true, mocked: { _ in stat() }) {
            try FileDescriptor(rawValue: fd).stat(retryOnInterrupt: false).rawValue
        }
    }

    /// Renames `from` to `to` (atomically replacing it). The corresponding C function is `rename`.
    package static func rename(_ from: String, _ to: String) -> Result<Void, Errno> {
        valueOrErrno(retryOnInterrupt: true) { system_rename(from, to) }.map { _ in () }
    }

    /// Makes a directory (EEXIST when it is there). The corresponding C function is `mkdir`.
    package static func mkdir(_ path: String, _ mode: mode_t) -> Result<Void, Errno> {
        valueOrErrno(retryOnInterrupt: true) { system_mkdir(path, mode) }.map { _ in () }
    }

    /// Sets an open file's permission bits. The corresponding C function is `fchmod`.
    package static func fchmod(_ fd: CInt, _ mode: mode_t) -> Result<Void, Errno> {
        valueOrErrno(retryOnInterrupt: true) { system_fchmod(fd, mode) }.map { _ in () }
    }

    /// Makes an open file's data and metadata durable. The corresponding C function is `fsync`.
    package static func fsync(_ fd: CInt) -> Result<Void, Errno> {
        valueOrErrno(retryOnInterrupt: true) { system_fsync(fd) }.map { _ in () }
    }

    /// CPUs online now (at least 1). The corresponding C function is `sysconf`.
    package static var onlineProcessors: Int { max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) }

    /// Writes all of `buffer`, retrying short writes and EINTR. Returns how many bytes were written
    /// before a failure (all of them on success) and the failure's errno, if any.
    /// The corresponding C function is `write`.
    package static func writeAll(_ fd: CInt, _ buffer: UnsafeRawBufferPointer) -> (written: Int, error: Errno?) {
        var done = 0
        while done < buffer.count {
            switch write(fd, UnsafeRawBufferPointer(rebasing: buffer[done...])) {
            case .success(let n): done += n
            case .failure(let e): return (done, e)
            }
        }
        return (done, nil)
    }

    /// Writes all of `text`'s UTF-8 bytes (see ``writeAll(_:_:)-(CInt,UnsafeRawBufferPointer)``); nil or the errno.
    @discardableResult
    package static func writeAll(_ fd: CInt, _ text: String) -> Errno? {
        var text = text
        return text.withUTF8 { writeAll(fd, UnsafeRawBufferPointer($0)).error }
    }

    /// Reads a small file whole (at most `limit` bytes), e.g. under /proc or /sys.
    /// The corresponding C functions are `open`, `read` and `close`.
    ///
    /// `regularFileOnly`: a state file cuff keeps (a cache, a bond store). Anything else at that
    /// path fails with ``Errno/invalidArgument``, and is never waited on: it is opened without
    /// blocking (a FIFO with no writer would hold `open` forever), then checked with `fstat`.
    package static func readFile(_ path: String, limit: Int = 4096, regularFileOnly: Bool = false) -> Result<
        [UInt8], Errno
    > {
        open(path, regularFileOnly ? O_RDONLY | O_NONBLOCK : O_RDONLY).flatMap { fd in
            defer { _ = close(fd) }
            if regularFileOnly {
                switch fstat(fd) {
                case .success(let st) where st.st_mode & S_IFMT == S_IFREG: break
                case .success: return .failure(.invalidArgument)
                case .failure(let e): return .failure(e)
                }
            }
            var out: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: min(limit, 4096))
            while out.count < limit {
                let want = min(chunk.count, limit - out.count)
                let r = chunk.withUnsafeMutableBytes {
                    read(fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<want]))
                }
                switch r {
                case .success(0): return .success(out)
                case .success(let n): out += chunk[0..<n]
                case .failure(let e): return .failure(e)
                }
            }
            return .success(out)
        }
    }

    /// The names in a directory (without `.` and `..`), at most `limit` of them.
    /// The corresponding C functions are `opendir`, `readdir` and `closedir`.
    package static func listDirectory(_ path: String, limit: Int = 100_000) -> Result<[String], Errno> {
        guard let dir = system_opendir(path) else { return .failure(Errno.current) }
        defer { _ = system_closedir(dir) }
        var names: [String] = []
        while names.count < limit, let entry = system_readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return .success(names)
    }

    /// A device or socket control request with a pointer argument. The corresponding C function is `ioctl`.
    package static func ioctl(_ fd: CInt, _ request: UInt, _ arg: UnsafeMutableRawPointer) -> Result<CInt, Errno> {
        valueOrErrno(retryOnInterrupt: true) { system_ioctl(fd, request, arg) }
    }

    /// A control request whose argument is an integer (e.g. `HCIDEVUP`'s device index).
    /// The corresponding C function is `ioctl`.
    package static func ioctl(_ fd: CInt, _ request: UInt, integer: Int) -> Result<CInt, Errno> {
        valueOrErrno(retryOnInterrupt: true) { system_ioctl(fd, request, UnsafeMutableRawPointer(bitPattern: integer)) }
    }

    /// Converts a wait limit to `poll` milliseconds: nil → -1 (no limit), rounded up, clamped.
    package static func pollMilliseconds(_ timeout: Duration?) -> CInt {
        guard let timeout else { return -1 }
        let ns = timeout.nanoseconds
        if ns <= 0 { return 0 }
        // rounded up, for any Int64 (a saturated deadline is near Int64.max)
        let ms = ns / 1_000_000 + (ns % 1_000_000 > 0 ? 1 : 0)
        return ms > Int64(CInt.max) ? CInt.max : CInt(ms)
    }
}
