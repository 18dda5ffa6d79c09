// SPDX-License-Identifier: GPL-2.0-or-later

/// Why a client procedure, or the whole bearer, failed.
///
/// Equality compares ``code`` and ``attError`` only.
public struct GATTClientError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// The server answered with an Error Response; see ``GATTClientError/attError``.
        case attError = "att_error"
        /// No response within 30 s (Core Vol 3 Part F §3.3.3). Fatal: close the bearer.
        case timeout
        /// A response of the wrong kind, or one nobody asked for. Fatal.
        case unexpectedResponse = "unexpected_response"
        /// A PDU longer than the ATT_MTU. Fatal.
        case pduTooLarge = "pdu_too_large"
        /// Bytes that are not an ATT PDU. Fatal.
        case malformedPDU = "malformed_pdu"
        /// An indication arrived while the previous one was still unconfirmed. Fatal.
        case unconfirmedIndication = "unconfirmed_indication"
        /// A well-formed response that makes no sense (handles going backwards, a bad declaration).
        case invalidResponse = "invalid_response"
        /// The value does not fit in one PDU at the current MTU.
        case valueTooLong = "value_too_long"
        /// The characteristic has no CCCD to subscribe with.
        case noCCCD = "no_cccd"
        /// The caller refused to raise link security.
        case securityRefused = "security_refused"
        /// An earlier fatal error ended this bearer; no more requests go out.
        case bearerFailed = "bearer_failed"
    }

    public var code: Code
    public var message: String
    /// The server's error code for ``Code/attError`` (and for a security refusal, the error that
    /// asked for more security).
    public var attError: ATTErrorCode?
    /// The handle the failure concerns, when there is one.
    public var handle: UInt16?

    public init(_ code: Code, _ message: String, attError: ATTErrorCode? = nil, handle: UInt16? = nil) {
        self.code = code
        self.message = message
        self.attError = attError
        self.handle = handle
    }

    /// True for the errors after which the bearer must be closed.
    public var isFatal: Bool {
        switch code {
        case .timeout, .unexpectedResponse, .pduTooLarge, .malformedPDU, .unconfirmedIndication, .bearerFailed: true
        default: false
        }
    }

    public static func == (a: GATTClientError, b: GATTClientError) -> Bool { a.code == b.code && a.attError == b.attError }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(attError)
    }

    public var description: String { "GATTClientError.\(code.rawValue): \(message)" }
}
