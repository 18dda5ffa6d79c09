// SPDX-License-Identifier: GPL-2.0-or-later

#if canImport(Glibc)
    import Glibc
#endif

/// An error number from a failed system call, with Swift names.
///
/// Modelled on swift-system's `Errno`: a raw-value wrapper, so unknown values survive, with named
/// constants for the values the transports meet. `description` reads like
/// `Connection refused (ECONNREFUSED)`.
public struct Errno: RawRepresentable, Error, Hashable, Sendable, CustomStringConvertible {
    /// The C `errno` value.
    public let rawValue: CInt

    @inlinable public init(rawValue: CInt) { self.rawValue = rawValue }

    /// The calling thread's `errno` now.
    public static var current: Errno {
        get { Errno(rawValue: Glibc.errno) }
        set { Glibc.errno = newValue.rawValue }
    }

    /// Operation not permitted. The corresponding C error is `EPERM`.
    public static let notPermitted = Errno(rawValue: EPERM)
    /// No such file or directory. The corresponding C error is `ENOENT`.
    public static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
    /// Interrupted by a signal. The corresponding C error is `EINTR`.
    public static let interrupted = Errno(rawValue: EINTR)
    /// Input/output error. The corresponding C error is `EIO`.
    public static let ioError = Errno(rawValue: EIO)
    /// Bad file descriptor. The corresponding C error is `EBADF`.
    public static let badFileDescriptor = Errno(rawValue: EBADF)
    /// Resource temporarily unavailable (would block). The corresponding C error is `EAGAIN`.
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    /// Out of memory. The corresponding C error is `ENOMEM`.
    public static let noMemory = Errno(rawValue: ENOMEM)
    /// Permission denied. The corresponding C error is `EACCES`.
    public static let permissionDenied = Errno(rawValue: EACCES)
    /// Device or resource busy. The corresponding C error is `EBUSY`.
    public static let resourceBusy = Errno(rawValue: EBUSY)
    /// File exists. The corresponding C error is `EEXIST`.
    public static let fileExists = Errno(rawValue: EEXIST)
    /// No such device. The corresponding C error is `ENODEV`.
    public static let noSuchDevice = Errno(rawValue: ENODEV)
    /// Invalid argument. The corresponding C error is `EINVAL`.
    public static let invalidArgument = Errno(rawValue: EINVAL)
    /// Too many open files in this process. The corresponding C error is `EMFILE`.
    public static let tooManyOpenFiles = Errno(rawValue: EMFILE)
    /// Broken pipe. The corresponding C error is `EPIPE`.
    public static let brokenPipe = Errno(rawValue: EPIPE)
    /// File name too long. The corresponding C error is `ENAMETOOLONG`.
    public static let fileNameTooLong = Errno(rawValue: ENAMETOOLONG)
    /// Not a socket. The corresponding C error is `ENOTSOCK`.
    public static let notSocket = Errno(rawValue: ENOTSOCK)
    /// Message too long. The corresponding C error is `EMSGSIZE`.
    public static let messageTooLong = Errno(rawValue: EMSGSIZE)
    /// Protocol not supported. The corresponding C error is `EPROTONOSUPPORT`.
    public static let protocolNotSupported = Errno(rawValue: EPROTONOSUPPORT)
    /// Operation not supported. The corresponding C error is `EOPNOTSUPP`.
    public static let notSupported = Errno(rawValue: EOPNOTSUPP)
    /// Address family not supported by the kernel. The corresponding C error is `EAFNOSUPPORT`.
    public static let addressFamilyNotSupported = Errno(rawValue: EAFNOSUPPORT)
    /// Address already in use. The corresponding C error is `EADDRINUSE`.
    public static let addressInUse = Errno(rawValue: EADDRINUSE)
    /// Cannot assign requested address. The corresponding C error is `EADDRNOTAVAIL`.
    public static let addressNotAvailable = Errno(rawValue: EADDRNOTAVAIL)
    /// Network is down. The corresponding C error is `ENETDOWN`.
    public static let networkDown = Errno(rawValue: ENETDOWN)
    /// Connection aborted. The corresponding C error is `ECONNABORTED`.
    public static let connectionAborted = Errno(rawValue: ECONNABORTED)
    /// Connection reset by peer. The corresponding C error is `ECONNRESET`.
    public static let connectionReset = Errno(rawValue: ECONNRESET)
    /// No buffer space available. The corresponding C error is `ENOBUFS`.
    public static let noBufferSpace = Errno(rawValue: ENOBUFS)
    /// Socket is already connected. The corresponding C error is `EISCONN`.
    public static let socketIsConnected = Errno(rawValue: EISCONN)
    /// Socket is not connected. The corresponding C error is `ENOTCONN`.
    public static let socketNotConnected = Errno(rawValue: ENOTCONN)
    /// Timed out. The corresponding C error is `ETIMEDOUT`.
    public static let timedOut = Errno(rawValue: ETIMEDOUT)
    /// Connection refused. The corresponding C error is `ECONNREFUSED`.
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    /// Host is down. The corresponding C error is `EHOSTDOWN`.
    public static let hostIsDown = Errno(rawValue: EHOSTDOWN)
    /// No route to host. The corresponding C error is `EHOSTUNREACH`.
    public static let noRouteToHost = Errno(rawValue: EHOSTUNREACH)
    /// Operation already in progress. The corresponding C error is `EALREADY`.
    public static let alreadyInProcess = Errno(rawValue: EALREADY)
    /// Operation now in progress. The corresponding C error is `EINPROGRESS`.
    public static let nowInProgress = Errno(rawValue: EINPROGRESS)
    /// Protocol error. The corresponding C error is `EPROTO`.
    public static let protocolError = Errno(rawValue: EPROTO)
    /// Not a directory. The corresponding C error is `ENOTDIR`.
    public static let notDirectory = Errno(rawValue: ENOTDIR)
    /// Read-only file system. The corresponding C error is `EROFS`.
    public static let readOnlyFileSystem = Errno(rawValue: EROFS)
    /// Operation not possible due to RF-kill. The corresponding C error is `ERFKILL`.
    public static let rfkill = Errno(rawValue: 132)

    /// The C name, e.g. `ECONNREFUSED`, or `errno N` for values without a name here.
    public var name: String {
        switch rawValue {
        case EPERM: "EPERM"
        case ENOENT: "ENOENT"
        case EINTR: "EINTR"
        case EIO: "EIO"
        case EBADF: "EBADF"
        case EAGAIN: "EAGAIN"
        case ENOMEM: "ENOMEM"
        case EACCES: "EACCES"
        case EBUSY: "EBUSY"
        case EEXIST: "EEXIST"
        case ENODEV: "ENODEV"
        case EINVAL: "EINVAL"
        case EMFILE: "EMFILE"
        case EPIPE: "EPIPE"
        case ENAMETOOLONG: "ENAMETOOLONG"
        case ENOTSOCK: "ENOTSOCK"
        case EMSGSIZE: "EMSGSIZE"
        case EPROTONOSUPPORT: "EPROTONOSUPPORT"
        case EOPNOTSUPP: "EOPNOTSUPP"
        case EAFNOSUPPORT: "EAFNOSUPPORT"
        case EADDRINUSE: "EADDRINUSE"
        case EADDRNOTAVAIL: "EADDRNOTAVAIL"
        case ENETDOWN: "ENETDOWN"
        case ECONNABORTED: "ECONNABORTED"
        case ECONNRESET: "ECONNRESET"
        case ENOBUFS: "ENOBUFS"
        case EISCONN: "EISCONN"
        case ENOTCONN: "ENOTCONN"
        case ETIMEDOUT: "ETIMEDOUT"
        case ECONNREFUSED: "ECONNREFUSED"
        case EHOSTDOWN: "EHOSTDOWN"
        case EHOSTUNREACH: "EHOSTUNREACH"
        case EALREADY: "EALREADY"
        case EINPROGRESS: "EINPROGRESS"
        case EPROTO: "EPROTO"
        case ENOTDIR: "ENOTDIR"
        case EROFS: "EROFS"
        case 132: "ERFKILL"
        default: "errno \(rawValue)"
        }
    }

    /// `strerror` text and the C name: `Connection refused (ECONNREFUSED)`.
    public var description: String {
        guard let text = strerror(rawValue) else { return name }
        return "\(String(cString: text)) (\(name))"
    }
}
