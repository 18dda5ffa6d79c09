// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// Record Access Control Point (0x2A52): op code, operator, operand.
public enum RecordAccessControlPoint: Sendable, Hashable {
    /// A client request: op codes 1 report, 2 delete, 3 abort, 4 report number, 7 combined report.
    case request(opCode: OpCode, operator: Operator, filter: Filter?)
    /// 0x05 Number of Stored Records Response (count sent in 1, 2 or 4 bytes).
    case numberOfRecords(UInt32, width: Int)
    /// 0x06 Response Code: which request, and how it went.
    case responseCode(requestOpCode: OpCode, response: ResponseCode)
    /// 0x08 Combined Report Response: records reported.
    case combinedReportResponse(UInt32, width: Int)

    public struct OpCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let reportStoredRecords = Self(rawValue: 1)
        public static let deleteStoredRecords = Self(rawValue: 2)
        public static let abortOperation = Self(rawValue: 3)
        public static let reportNumberOfStoredRecords = Self(rawValue: 4)
        public static let numberOfStoredRecordsResponse = Self(rawValue: 5)
        public static let responseCode = Self(rawValue: 6)
        public static let combinedReport = Self(rawValue: 7)
        public static let combinedReportResponse = Self(rawValue: 8)

        public var name: String {
            switch rawValue {
            case 1: "report_stored_records"
            case 2: "delete_stored_records"
            case 3: "abort_operation"
            case 4: "report_number_of_stored_records"
            case 5: "number_of_stored_records_response"
            case 6: "response_code"
            case 7: "combined_report"
            case 8: "combined_report_response"
            default: "op_code_\(rawValue)"
            }
        }
        public var description: String { name }
    }

    public struct Operator: RawRepresentable, Sendable, Hashable {
        public var rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let null = Self(rawValue: 0)
        public static let allRecords = Self(rawValue: 1)
        public static let lessThanOrEqualTo = Self(rawValue: 2)
        public static let greaterThanOrEqualTo = Self(rawValue: 3)
        public static let withinRangeOf = Self(rawValue: 4)
        public static let firstRecord = Self(rawValue: 5)
        public static let lastRecord = Self(rawValue: 6)

        public var name: String {
            switch rawValue {
            case 0: "null"
            case 1: "all_records"
            case 2: "less_than_or_equal_to"
            case 3: "greater_than_or_equal_to"
            case 4: "within_range_of"
            case 5: "first_record"
            case 6: "last_record"
            default: "operator_\(rawValue)"
            }
        }
        /// Operators 2–4 take a filter operand.
        public var takesOperand: Bool { (2...4).contains(rawValue) }
    }

    public struct ResponseCode: RawRepresentable, Sendable, Hashable {
        public var rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let success = Self(rawValue: 1)
        public static let opCodeNotSupported = Self(rawValue: 2)
        public static let invalidOperator = Self(rawValue: 3)
        public static let operatorNotSupported = Self(rawValue: 4)
        public static let invalidOperand = Self(rawValue: 5)
        public static let noRecordsFound = Self(rawValue: 6)
        public static let abortUnsuccessful = Self(rawValue: 7)
        public static let procedureNotCompleted = Self(rawValue: 8)
        public static let operandNotSupported = Self(rawValue: 9)
        public static let serverBusy = Self(rawValue: 10)

        public var name: String {
            switch rawValue {
            case 1: "success"
            case 2: "op_code_not_supported"
            case 3: "invalid_operator"
            case 4: "operator_not_supported"
            case 5: "invalid_operand"
            case 6: "no_records_found"
            case 7: "abort_unsuccessful"
            case 8: "procedure_not_completed"
            case 9: "operand_not_supported"
            case 10: "server_busy"
            default: "response_code_\(rawValue)"
            }
        }
    }

    /// A filter operand: type 0x01 sequence number (uint16), 0x02 User Facing Time (uint32).
    public enum Filter: Sendable, Hashable {
        case sequenceNumber(UInt16)
        case sequenceNumberRange(UInt16, UInt16)
        case userFacingTime(UInt32)
        case userFacingTimeRange(UInt32, UInt32)
        /// A filter type we do not know, with its raw operand.
        case other(type: UInt8, operand: [UInt8])
    }

    /// Which direction to decode as: a request from a client, a response from a server, or either.
    public enum Direction: Sendable { case request, response, any }

    public static func decode(_ bytes: ArraySlice<UInt8>, as direction: Direction = .any) throws(BPSDecodingError)
        -> Decoded<Self>
    {
        var r = ByteReader(bytes)
        let op = OpCode(rawValue: try r.u8("Op Code"))
        let opr = Operator(rawValue: try r.u8("Operator"))
        var w: [DecodeWarning] = []
        let isResponse = [5, 6, 8].contains(op.rawValue)
        let isRequest = [1, 2, 3, 4, 7].contains(op.rawValue)
        switch direction {
        case .request where !isRequest, .response where !isResponse, .any where !isRequest && !isResponse:
            throw BPSDecodingError(
                .unsupported, field: "Op Code", offset: 0,
                detail:
                    "0x\(String(op.rawValue, radix: 16)) is not a RACP \(direction == .request ? "request" : direction == .response ? "response" : "op code")"
            )
        default: break
        }
        let value: Self
        if isResponse {
            guard opr == .null else {
                throw BPSDecodingError(
                    .invalidValue, field: "Operator", offset: 1,
                    detail: "responses use the Null operator (0), got \(opr.rawValue)")
            }
            if op == .responseCode {
                let req = OpCode(rawValue: try r.u8("Request Op Code"))
                let code = ResponseCode(rawValue: try r.u8("Response Code Value"))
                value = .responseCode(requestOpCode: req, response: code)
            } else {
                let at = r.offset
                let n = r.remaining
                let count: UInt32
                switch n {
                case 1: count = UInt32(r.readUInt8()!)
                case 2: count = UInt32(r.readUInt16()!)
                case 4: count = r.readUInt32()!
                case 0: throw .truncated("Number of Records", at: at, need: 1, have: 0)
                default:
                    throw BPSDecodingError(
                        .invalidLength, field: "Number of Records", offset: at,
                        detail: "count is 1, 2 or 4 bytes, got \(n)")
                }
                value =
                    op == .numberOfStoredRecordsResponse
                    ? .numberOfRecords(count, width: n) : .combinedReportResponse(count, width: n)
            }
        } else {
            var filter: Filter? = nil
            if opr.takesOperand {
                let type = try r.u8("Filter Type")
                let ranged = opr == .withinRangeOf
                switch type {
                case 1:
                    let a = try r.u16("Filter Parameter")
                    filter = ranged ? .sequenceNumberRange(a, try r.u16("Filter Parameter")) : .sequenceNumber(a)
                case 2:
                    let a = try r.u32("Filter Parameter")
                    filter = ranged ? .userFacingTimeRange(a, try r.u32("Filter Parameter")) : .userFacingTime(a)
                default:
                    filter = .other(type: type, operand: Array(r.readRemaining()))
                }
            }
            value = .request(opCode: op, operator: opr, filter: filter)
        }
        r.noteTrailing(&w)
        return Decoded(value: value, warnings: w)
    }

    public func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 8)
        func count(_ n: UInt32, _ width: Int) {
            switch width {
            case 1: w.write(UInt8(truncatingIfNeeded: n))
            case 4: w.write(n)
            default: w.write(UInt16(truncatingIfNeeded: n))
            }
        }
        switch self {
        case let .request(op, opr, filter):
            w.write(op.rawValue)
            w.write(opr.rawValue)
            switch filter {
            case nil: break
            case let .sequenceNumber(a): w.write(UInt8(1)); w.write(a)
            case let .sequenceNumberRange(a, b): w.write(UInt8(1)); w.write(a); w.write(b)
            case let .userFacingTime(a): w.write(UInt8(2)); w.write(a)
            case let .userFacingTimeRange(a, b): w.write(UInt8(2)); w.write(a); w.write(b)
            case let .other(t, operand): w.write(t); w.write(contentsOf: operand)
            }
        case let .numberOfRecords(n, width):
            w.write(OpCode.numberOfStoredRecordsResponse.rawValue); w.write(UInt8(0)); count(n, width)
        case let .responseCode(req, code):
            w.write(OpCode.responseCode.rawValue); w.write(UInt8(0)); w.write(req.rawValue); w.write(code.rawValue)
        case let .combinedReportResponse(n, width):
            w.write(OpCode.combinedReportResponse.rawValue); w.write(UInt8(0)); count(n, width)
        }
        return w.bytes
    }

    public var json: JSON {
        switch self {
        case let .request(op, opr, filter):
            var f: JSON = .null
            switch filter {
            case nil: break
            case let .sequenceNumber(a): f = .object([("type", .string("sequence_number")), ("value", .int(Int64(a)))])
            case let .sequenceNumberRange(a, b):
                f = .object([("type", .string("sequence_number")), ("from", .int(Int64(a))), ("to", .int(Int64(b)))])
            case let .userFacingTime(a):
                f = .object([("type", .string("user_facing_time")), ("value", .int(Int64(a)))])
            case let .userFacingTimeRange(a, b):
                f = .object([("type", .string("user_facing_time")), ("from", .int(Int64(a))), ("to", .int(Int64(b)))])
            case let .other(t, operand):
                f = .object([("type", .int(Int64(t))), ("operand", .string(Hex.encode(operand)))])
            }
            return .object([
                ("kind", .string("request")), ("op_code", .string(op.name)), ("operator", .string(opr.name)),
                ("filter", f),
            ])
        case let .numberOfRecords(n, _):
            return .object([
                ("kind", .string("response")), ("op_code", .string(OpCode.numberOfStoredRecordsResponse.name)),
                ("number_of_records", .int(Int64(n))),
            ])
        case let .responseCode(req, code):
            return .object([
                ("kind", .string("response")), ("op_code", .string(OpCode.responseCode.name)),
                ("request_op_code", .string(req.name)), ("response_code", .string(code.name)),
                ("response_code_value", .int(Int64(code.rawValue))),
            ])
        case let .combinedReportResponse(n, _):
            return .object([
                ("kind", .string("response")), ("op_code", .string(OpCode.combinedReportResponse.name)),
                ("number_of_records", .int(Int64(n))),
            ])
        }
    }
}
