// SPDX-License-Identifier: GPL-2.0-or-later

/// Why a client procedure, or the whole bearer, failed.
///
/// Equality compares ``code`` and ``attError`` only.
public struct GATTClientError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The server answered with an Error Response; see ``GATTClientError/attError``.
        public static let attError = Code(rawValue: "att_error")
        /// No response within 30 s (Core Vol 3 Part F §3.3.3). Fatal: close the bearer.
        public static let timeout = Code(rawValue: "timeout")
        /// A response of the wrong kind, or one nobody asked for. Fatal.
        public static let unexpectedResponse = Code(rawValue: "unexpected_response")
        /// A PDU longer than the ATT_MTU. Fatal.
        public static let pduTooLarge = Code(rawValue: "pdu_too_large")
        /// Bytes that are not an ATT PDU. Fatal.
        public static let malformedPDU = Code(rawValue: "malformed_pdu")
        /// An indication arrived while the previous one was still unconfirmed. Fatal.
        public static let unconfirmedIndication = Code(rawValue: "unconfirmed_indication")
        /// A well-formed response that makes no sense (handles going backwards, a bad declaration).
        public static let invalidResponse = Code(rawValue: "invalid_response")
        /// The value does not fit in one PDU at the current MTU.
        public static let valueTooLong = Code(rawValue: "value_too_long")
        /// The characteristic has no CCCD to subscribe with.
        public static let noCCCD = Code(rawValue: "no_cccd")
        /// The caller refused to raise link security.
        public static let securityRefused = Code(rawValue: "security_refused")
        /// An earlier fatal error ended this bearer; no more requests go out.
        public static let bearerFailed = Code(rawValue: "bearer_failed")
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

    public static func == (a: GATTClientError, b: GATTClientError) -> Bool {
        a.code == b.code && a.attError == b.attError
    }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(attError)
    }

    public var description: String { "GATTClientError.\(code.rawValue): \(message)" }
}
