// SPDX-License-Identifier: GPL-2.0-or-later
//
// The only place where the transports call the kernel. Each `system_*` shim wraps exactly one C
// function, checks the debug-build mock table first, and otherwise returns what the kernel gave
// (-1 with `errno` set on failure). The typed layer in `Sys` turns that into `Result<_, Errno>`
// and retries EINTR where that is right. BlueZ reuses these (package access). The file calls
// swift-system covers (open, close, read, write, lseek, stat, lstat, fstat, dup2, pipe) have no
// shim: `Sys` makes them through its `FileDescriptor` and `FilePath`, with the same mock table.

#if canImport(Glibc)
    import Glibc
#endif
import CEpoll

@inline(__always)
private func mock(_ name: String, _ args: Int...) -> Int? {
    #if ENABLE_MOCKING
        return mockedResult(name, args)
    #else
        return nil
    #endif
}

/// The corresponding C function is `socket`.
package func system_socket(_ domain: CInt, _ type: CInt, _ proto: CInt) -> CInt {
    if let r = mock("socket", Int(domain), Int(type), Int(proto)) { return CInt(r) }
    return Glibc.socket(domain, type, proto)
}

/// The corresponding C function is `socketpair`.
package func system_socketpair(_ domain: CInt, _ type: CInt, _ proto: CInt, _ fds: UnsafeMutablePointer<CInt>) -> CInt {
    if let r = mock("socketpair", Int(domain), Int(type), Int(proto)) { return CInt(r) }
    return Glibc.socketpair(domain, type, proto, fds)
}

/// The corresponding C function is `bind`.
package func system_bind(_ fd: CInt, _ addr: UnsafePointer<sockaddr>, _ len: socklen_t) -> CInt {
    if let r = mock("bind", Int(fd), Int(len)) { return CInt(r) }
    return Glibc.bind(fd, addr, len)
}

/// The corresponding C function is `connect`.
package func system_connect(_ fd: CInt, _ addr: UnsafePointer<sockaddr>, _ len: socklen_t) -> CInt {
    if let r = mock("connect", Int(fd), Int(len)) { return CInt(r) }
    return Glibc.connect(fd, addr, len)
}

/// The corresponding C function is `listen`.
package func system_listen(_ fd: CInt, _ backlog: CInt) -> CInt {
    if let r = mock("listen", Int(fd), Int(backlog)) { return CInt(r) }
    return Glibc.listen(fd, backlog)
}

/// The corresponding C function is `accept`.
package func system_accept(_ fd: CInt, _ addr: UnsafeMutablePointer<sockaddr>?, _ len: UnsafeMutablePointer<socklen_t>?)
    -> CInt
{
    if let r = mock("accept", Int(fd)) { return CInt(r) }
    return Glibc.accept(fd, addr, len)
}

/// The corresponding C function is `fcntl` (with an integer argument).
package func system_fcntl(_ fd: CInt, _ command: CInt, _ value: CInt) -> CInt {
    if let r = mock("fcntl", Int(fd), Int(command), Int(value)) { return CInt(r) }
    return Glibc.fcntl(fd, command, value)
}

/// The corresponding C function is `send`.
package func system_send(_ fd: CInt, _ buf: UnsafeRawPointer?, _ len: Int, _ flags: CInt) -> Int {
    if let r = mock("send", Int(fd), len, Int(flags)) { return r }
    return Glibc.send(fd, buf, len, flags)
}

/// The corresponding C function is `recv`.
package func system_recv(_ fd: CInt, _ buf: UnsafeMutableRawPointer?, _ len: Int, _ flags: CInt) -> Int {
    if let r = mock("recv", Int(fd), len, Int(flags)) { return r }
    return Glibc.recv(fd, buf, len, flags)
}

/// The corresponding C function is `poll`.
package func system_poll(_ fds: UnsafeMutablePointer<pollfd>, _ count: nfds_t, _ timeoutMS: CInt) -> CInt {
    if let r = mock("poll", Int(fds.pointee.fd), Int(count), Int(timeoutMS)) { return CInt(r) }
    return Glibc.poll(fds, count, timeoutMS)
}

/// The corresponding C function is `setsockopt`.
package func system_setsockopt(_ fd: CInt, _ level: CInt, _ name: CInt, _ value: UnsafeRawPointer?, _ len: socklen_t)
    -> CInt
{
    if let r = mock("setsockopt", Int(fd), Int(level), Int(name)) { return CInt(r) }
    return Glibc.setsockopt(fd, level, name, value, len)
}

/// The corresponding C function is `getsockopt`.
package func system_getsockopt(
    _ fd: CInt, _ level: CInt, _ name: CInt, _ value: UnsafeMutableRawPointer?, _ len: UnsafeMutablePointer<socklen_t>?
) -> CInt {
    if let r = mock("getsockopt", Int(fd), Int(level), Int(name)) { return CInt(r) }
    return Glibc.getsockopt(fd, level, name, value, len)
}

/// The corresponding C function is `shutdown`.
package func system_shutdown(_ fd: CInt, _ how: CInt) -> CInt {
    if let r = mock("shutdown", Int(fd), Int(how)) { return CInt(r) }
    return Glibc.shutdown(fd, how)
}

/// The corresponding C function is `unlink`.
package func system_unlink(_ path: UnsafePointer<CChar>) -> CInt {
    if let r = mock("unlink") { return CInt(r) }
    return Glibc.unlink(path)
}

/// The corresponding C function is `nanosleep`.
package func system_nanosleep(_ request: UnsafePointer<timespec>, _ remaining: UnsafeMutablePointer<timespec>?) -> CInt
{
    if let r = mock("nanosleep") { return CInt(r) }
    return Glibc.nanosleep(request, remaining)
}

/// The corresponding C function is `isatty`.
package func system_isatty(_ fd: CInt) -> CInt {
    if let r = mock("isatty", Int(fd)) { return CInt(r) }
    return Glibc.isatty(fd)
}

/// The corresponding C function is `ioctl` (with a pointer argument, or an integer passed as a
/// pointer's bit pattern; nil is integer 0).
package func system_ioctl(_ fd: CInt, _ request: UInt, _ arg: UnsafeMutableRawPointer?) -> CInt {
    if let r = mock("ioctl", Int(fd), Int(request)) { return CInt(r) }
    guard let arg else { return Glibc.ioctl(fd, request, CInt(0)) }
    return Glibc.ioctl(fd, request, arg)
}

/// The corresponding C function is `sigaction`.
package func system_sigaction(
    _ signo: CInt, _ action: UnsafePointer<sigaction>?, _ old: UnsafeMutablePointer<sigaction>?
) -> CInt {
    if let r = mock("sigaction", Int(signo)) { return CInt(r) }
    return sigaction(signo, action, old)
}

/// The corresponding C function is `pthread_sigmask` (returns an error number, not -1/errno).
package func system_pthread_sigmask(
    _ how: CInt, _ set: UnsafePointer<sigset_t>?, _ old: UnsafeMutablePointer<sigset_t>?
) -> CInt {
    if let r = mock("pthread_sigmask", Int(how)) { return r == -1 ? Errno.current.rawValue : CInt(r) }
    return pthread_sigmask(how, set, old)
}

/// The corresponding C function is `fchmod`.
package func system_fchmod(_ fd: CInt, _ mode: mode_t) -> CInt {
    if let r = mock("fchmod", Int(fd), Int(mode)) { return CInt(r) }
    return Glibc.fchmod(fd, mode)
}

/// The corresponding C function is `rename`.
package func system_rename(_ from: String, _ to: String) -> CInt {
    if let r = mock("rename") { return CInt(r) }
    return Glibc.rename(from, to)
}

/// The corresponding C function is `mkdir`.
package func system_mkdir(_ path: String, _ mode: mode_t) -> CInt {
    if let r = mock("mkdir", Int(mode)) { return CInt(r) }
    return Glibc.mkdir(path, mode)
}

/// The corresponding C function is `fsync`.
package func system_fsync(_ fd: CInt) -> CInt {
    if let r = mock("fsync", Int(fd)) { return CInt(r) }
    return Glibc.fsync(fd)
}

/// The corresponding C function is `opendir`.
package func system_opendir(_ path: UnsafePointer<CChar>) -> OpaquePointer? {
    if let r = mock("opendir"), r == -1 { return nil }
    return Glibc.opendir(path)
}

/// The corresponding C function is `readdir` (nil at the end, or on error with errno set).
package func system_readdir(_ dir: OpaquePointer) -> UnsafeMutablePointer<dirent>? {
    Glibc.readdir(dir)
}

/// The corresponding C function is `closedir`.
package func system_closedir(_ dir: OpaquePointer) -> CInt {
    Glibc.closedir(dir)
}

/// The corresponding C function is `epoll_create1` (with `EPOLL_CLOEXEC`).
package func system_epoll_create1() -> CInt {
    if let r = mock("epoll_create1") { return CInt(r) }
    return cuff_epoll_create()
}

/// The corresponding C function is `epoll_ctl` (with `data.fd = fd`).
package func system_epoll_ctl(_ epfd: CInt, _ op: CInt, _ fd: CInt, _ events: UInt32) -> CInt {
    if let r = mock("epoll_ctl", Int(epfd), Int(op), Int(fd)) { return CInt(r) }
    return cuff_epoll_ctl(epfd, op, fd, events)
}

/// The corresponding C function is `epoll_wait` (descriptors and events into two arrays).
package func system_epoll_wait(
    _ epfd: CInt, _ fds: UnsafeMutablePointer<CInt>, _ events: UnsafeMutablePointer<UInt32>, _ max: CInt,
    _ timeoutMS: CInt
) -> CInt {
    if let r = mock("epoll_wait", Int(epfd), Int(max), Int(timeoutMS)) { return CInt(r) }
    return cuff_epoll_wait(epfd, fds, events, max, timeoutMS)
}

/// The corresponding C function is `readlink`.
package func system_readlink(_ path: UnsafePointer<CChar>, _ buf: UnsafeMutablePointer<CChar>, _ size: Int) -> Int {
    if let r = mock("readlink", size) { return r }
    return Glibc.readlink(path, buf, size)
}
