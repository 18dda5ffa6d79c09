// SPDX-License-Identifier: GPL-2.0-or-later

/// The error code of an ATT Error Response (Core Vol 3 Part F §3.4.1.1, Table 3.4) and the common
/// profile and service error codes (Core Specification Supplement Part B §1.2).
///
/// Unknown and reserved values survive a parse and an encode unchanged.
public struct ATTErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    /// The attribute handle given was not valid on this server.
    public static let invalidHandle = ATTErrorCode(0x01)
    /// The attribute cannot be read.
    public static let readNotPermitted = ATTErrorCode(0x02)
    /// The attribute cannot be written.
    public static let writeNotPermitted = ATTErrorCode(0x03)
    /// The attribute PDU was invalid.
    public static let invalidPDU = ATTErrorCode(0x04)
    /// The attribute requires authentication before it can be read or written.
    public static let insufficientAuthentication = ATTErrorCode(0x05)
    /// The server does not support the request received from the client.
    public static let requestNotSupported = ATTErrorCode(0x06)
    /// The offset specified was past the end of the attribute.
    public static let invalidOffset = ATTErrorCode(0x07)
    /// The attribute requires authorization before it can be read or written.
    public static let insufficientAuthorization = ATTErrorCode(0x08)
    /// Too many prepare writes have been queued.
    public static let prepareQueueFull = ATTErrorCode(0x09)
    /// No attribute found within the given attribute handle range.
    public static let attributeNotFound = ATTErrorCode(0x0A)
    /// The attribute cannot be read using the Read Blob Request.
    public static let attributeNotLong = ATTErrorCode(0x0B)
    /// The Encryption Key Size used for encrypting this link is too short.
    public static let insufficientEncryptionKeySize = ATTErrorCode(0x0C)
    /// The attribute value length is invalid for the operation.
    public static let invalidAttributeValueLength = ATTErrorCode(0x0D)
    /// The request has encountered an unlikely error and could not be completed.
    public static let unlikelyError = ATTErrorCode(0x0E)
    /// The attribute requires encryption before it can be read or written.
    public static let insufficientEncryption = ATTErrorCode(0x0F)
    /// The attribute type is not a supported grouping attribute.
    public static let unsupportedGroupType = ATTErrorCode(0x10)
    /// Insufficient resources to complete the request.
    public static let insufficientResources = ATTErrorCode(0x11)
    /// The server requests the client to rediscover the database.
    public static let databaseOutOfSync = ATTErrorCode(0x12)
    /// The attribute parameter value was not allowed.
    public static let valueNotAllowed = ATTErrorCode(0x13)
    /// Common profile error: a write request was rejected.
    public static let writeRequestRejected = ATTErrorCode(0xFC)
    /// Common profile error: a CCCD is not configured as the profile requires.
    public static let cccdImproperlyConfigured = ATTErrorCode(0xFD)
    /// Common profile error: a request cannot be serviced because a procedure is already running.
    public static let procedureAlreadyInProgress = ATTErrorCode(0xFE)
    /// Common profile error: an attribute value is out of range.
    public static let outOfRange = ATTErrorCode(0xFF)

    /// Application error `0x80 + n`, for `n` in `0...0x1F` (defined by a higher-layer specification).
    public static func application(_ n: UInt8) -> ATTErrorCode { ATTErrorCode(0x80 | (n & 0x1F)) }

    /// True for the application error range 0x80–0x9F.
    public var isApplicationError: Bool { (0x80...0x9F).contains(rawValue) }

    /// True for the errors that a raise of link security may cure (0x05, 0x0C, 0x0F).
    public var isSecurityError: Bool {
        self == .insufficientAuthentication || self == .insufficientEncryption || self == .insufficientEncryptionKeySize
    }

    public var name: String {
        switch self {
        case .invalidHandle: "Invalid Handle"
        case .readNotPermitted: "Read Not Permitted"
        case .writeNotPermitted: "Write Not Permitted"
        case .invalidPDU: "Invalid PDU"
        case .insufficientAuthentication: "Insufficient Authentication"
        case .requestNotSupported: "Request Not Supported"
        case .invalidOffset: "Invalid Offset"
        case .insufficientAuthorization: "Insufficient Authorization"
        case .prepareQueueFull: "Prepare Queue Full"
        case .attributeNotFound: "Attribute Not Found"
        case .attributeNotLong: "Attribute Not Long"
        case .insufficientEncryptionKeySize: "Insufficient Encryption Key Size"
        case .invalidAttributeValueLength: "Invalid Attribute Value Length"
        case .unlikelyError: "Unlikely Error"
        case .insufficientEncryption: "Insufficient Encryption"
        case .unsupportedGroupType: "Unsupported Group Type"
        case .insufficientResources: "Insufficient Resources"
        case .databaseOutOfSync: "Database Out Of Sync"
        case .valueNotAllowed: "Value Not Allowed"
        case .writeRequestRejected: "Write Request Rejected"
        case .cccdImproperlyConfigured: "Client Characteristic Configuration Descriptor Improperly Configured"
        case .procedureAlreadyInProgress: "Procedure Already in Progress"
        case .outOfRange: "Out of Range"
        default: isApplicationError ? "Application Error" : "Reserved"
        }
    }

    /// `Insufficient Authentication (0x05)`.
    public var description: String { "\(name) (0x\(hex2(rawValue)))" }
}
