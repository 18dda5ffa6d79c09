// SPDX-License-Identifier: GPL-2.0-or-later

/// How a `cuff` command ends: its process exit status, one named value per meaning (the numbers
/// are the README's). A command's library code throws one; the executable exits with its ``code``.
/// Several meanings share a number where the commands' documented statuses do (each command names
/// only its own).
public struct ExitStatus: Error, Hashable, Sendable, CustomStringConvertible {
    /// The process exit status.
    public let code: Int32

    public init(_ code: Int32) { self.code = code }

    public var description: String { "exit status \(code)" }

    public static let success = ExitStatus(0)
    /// `decode`: an input did not decode; `replay`: the capture is damaged; `plot`: the input cannot be read.
    public static let failure = ExitStatus(1)
    /// `measure`, `replay`: no measurement.
    public static let noResult = ExitStatus(2)
    /// `measure`: the user stopped the cuff.
    public static let stopped = ExitStatus(3)
    /// `measure`: the cuff disconnected.
    public static let disconnected = ExitStatus(4)
    public static let timedOut = ExitStatus(5)
    public static let securityRefused = ExitStatus(6)
    /// Not a blood-pressure cuff (no service); `replay`: values on handles nothing maps;
    /// `simulate --from-capture`: no connection can be served.
    public static let serviceMissing = ExitStatus(7)
    public static let protocolError = ExitStatus(8)
    /// The link, socket or adapter cannot be used; `sync`: readings still wait in the outbox.
    public static let connectionFailed = ExitStatus(9)
    /// A sink (stdout, the store) failed.
    public static let sinkFailed = ExitStatus(10)
    /// `history`, `plot --store`: rows of the store could not be read and were skipped.
    public static let rowsSkipped = ExitStatus(11)
    /// An Omron cuff refused the key (paired with another key, or never paired).
    public static let keyRefused = ExitStatus(12)
    /// Omron pairing asked for while the cuff was not in pairing mode (Bluetooth button not held).
    public static let notInPairingMode = ExitStatus(13)
    /// The Omron cuff latched an earlier refusal until its batteries go out and in.
    public static let keyLatched = ExitStatus(14)
    /// `plot`: no session `--session N` in the input.
    public static let noSuchSession = ExitStatus(2)
    /// `plot --store`: no reading in the store (or none matches `--since`/`--user`).
    public static let nothingToPlot = ExitStatus(3)
    /// `plot`: rsvg-convert is missing or failed.
    public static let converterFailed = ExitStatus(4)
    /// A usage error (argument-parser's own status for one).
    public static let usage = ExitStatus(64)
    /// stdout's reader went away: 128 + SIGPIPE, as for `cat` in `cat BIG | head -1`.
    public static let readerGone = ExitStatus(141)
}

/// An error that ends a command with a known ``ExitStatus`` (what went wrong was said already).
public protocol ExitStatusError: Error {
    var exitStatus: ExitStatus { get }
}

extension ExitStatus: ExitStatusError {
    public var exitStatus: ExitStatus { self }
}
