// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

extension TransportError {
    /// ``errno`` as an ``Errno``, for matching by name (`error.systemErrno == .resourceBusy`).
    public var systemErrno: Errno? { errno.map(Errno.init(rawValue:)) }

    /// A failed system call: names the call and its object, gives the errno, then what to do.
    ///
    /// The message reads `connect(unix:/tmp/cuff.sock): No such file or directory (ENOENT) — no
    /// simulator listening at …`. The code follows the errno: ETIMEDOUT → `.timedOut`, EAFNOSUPPORT
    /// / EPROTONOSUPPORT → `.unsupported`, ENOTCONN / EPIPE / ECONNRESET → `.notConnected`,
    /// EMSGSIZE → `.oversize`, anything else `.systemCall`. Callers may override `code`.
    package static func system(
        _ call: String, _ object: String, _ errno: Errno, hint: String? = nil, code: Code? = nil
    ) -> TransportError {
        let derived: Code
        switch errno {
        case .timedOut: derived = .timedOut
        case .addressFamilyNotSupported, .protocolNotSupported: derived = .unsupported
        case .socketNotConnected, .brokenPipe, .connectionReset: derived = .notConnected
        case .messageTooLong: derived = .oversize
        default: derived = .systemCall
        }
        var message = "\(call)(\(object)): \(errno)"
        if let hint { message += " — \(hint)" }
        return TransportError(code ?? derived, message, errno: errno.rawValue)
    }
}
