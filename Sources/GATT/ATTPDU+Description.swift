// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

extension ATTPDU: CustomStringConvertible {
    /// One line in the btmon spirit, e.g. `Read By Type Request 0x0001-0xFFFF type 2803` or
    /// `Handle Value Indication 0x0006: 1e8a`.
    public var description: String {
        let name = opcode.name ?? opcode.description
        switch self {
        case let .errorResponse(request, handle, error):
            return "\(name) to \(request) at \(Hex.handle(handle)): \(error)"
        case let .exchangeMTURequest(mtu), let .exchangeMTUResponse(mtu):
            return "\(name) \(mtu)"
        case let .findInformationRequest(start, end):
            return "\(name) \(Hex.handle(start))-\(Hex.handle(end))"
        case let .findInformationResponse(list):
            return "\(name) " + list.map { "\(Hex.handle($0.handle)) \($0.uuid)" }.joined(separator: ", ")
        case let .findByTypeValueRequest(start, end, type, value):
            return
                "\(name) \(Hex.handle(start))-\(Hex.handle(end)) type \(BluetoothUUID(type)) value \(Hex.encode(value))"
        case let .findByTypeValueResponse(list):
            return "\(name) "
                + list.map { "\(Hex.handle($0.foundHandle))-\(Hex.handle($0.groupEndHandle))" }.joined(separator: ", ")
        case let .readByTypeRequest(start, end, type), let .readByGroupTypeRequest(start, end, type):
            return "\(name) \(Hex.handle(start))-\(Hex.handle(end)) type \(type)"
        case let .readByTypeResponse(list):
            return "\(name) " + list.map { "\(Hex.handle($0.handle)): \(Hex.encode($0.value))" }.joined(separator: ", ")
        case let .readByGroupTypeResponse(list):
            return "\(name) "
                + list.map { "\(Hex.handle($0.handle))-\(Hex.handle($0.endGroupHandle)): \(Hex.encode($0.value))" }
                .joined(separator: ", ")
        case let .readRequest(handle):
            return "\(name) \(Hex.handle(handle))"
        case let .readBlobRequest(handle, offset):
            return "\(name) \(Hex.handle(handle)) offset \(offset)"
        case let .readResponse(value), let .readBlobResponse(value):
            return "\(name): \(Hex.encode(value))"
        case let .writeRequest(handle, value), let .writeCommand(handle, value),
            let .handleValueNotification(handle, value), let .handleValueIndication(handle, value):
            return "\(name) \(Hex.handle(handle)): \(Hex.encode(value))"
        case .writeResponse, .handleValueConfirmation:
            return name
        case let .unknown(_, payload):
            return "\(name): \(Hex.encode(payload))"
        }
    }
}
