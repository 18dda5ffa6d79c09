// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// The discovery procedure's progress: primary services, then each service's characteristics,
/// then each characteristic's descriptors (Core Vol 3 Part G §4.4.1, §4.6.1, §4.7.1).
///
/// Every entry of every answer must lie at or past the cursor and inside the range asked for,
/// and the cursor then moves past it; an answer that breaks this ends discovery with
/// ``GATTClientError/Code/invalidResponse``, so a confused peer cannot make it loop. Cursors are
/// `Int` so "past 0xFFFF" is representable.
struct Discovery: Sendable {
    let filter: [BluetoothUUID]
    private var phase: Phase = .services(cursor: 1)
    private var services: [GATTProfile.Service] = []

    private enum Phase: Sendable {
        case services(cursor: Int)
        /// `cursor` nil: start of the service.
        case characteristics(service: Int, cursor: Int?)
        case descriptors(service: Int, characteristic: Int, cursor: Int?)
    }

    init(filter: [BluetoothUUID]) { self.filter = filter }

    /// The next request, or the finished profile.
    mutating func next() -> ProcedureStep {
        while true {
            switch phase {
            case let .services(cursor):
                guard cursor <= 0xFFFF else { phase = .characteristics(service: 0, cursor: nil); continue }
                return .send(.readByGroupTypeRequest(start: UInt16(cursor), end: 0xFFFF, type: .primaryService))
            case let .characteristics(s, cursor):
                guard s < services.count else {
                    phase = .descriptors(service: 0, characteristic: 0, cursor: nil); continue
                }
                let from = cursor ?? Int(services[s].handle) + 1
                guard from <= Int(services[s].endHandle) else {
                    phase = .characteristics(service: s + 1, cursor: nil); continue
                }
                return .send(.readByTypeRequest(start: UInt16(from), end: services[s].endHandle, type: .characteristic))
            case let .descriptors(s, c, cursor):
                guard s < services.count else { return .done(.success(.profile(GATTProfile(services: services)))) }
                guard c < services[s].characteristics.count else {
                    phase = .descriptors(service: s + 1, characteristic: 0, cursor: nil); continue
                }
                let (lower, upper) = descriptorRange(s, c)
                let from = cursor ?? lower
                guard from <= upper else {
                    phase = .descriptors(service: s, characteristic: c + 1, cursor: nil); continue
                }
                return .send(.findInformationRequest(start: UInt16(from), end: UInt16(upper)))
            }
        }
    }

    /// From after a characteristic's value to before the next declaration or the service's end.
    private func descriptorRange(_ s: Int, _ c: Int) -> (Int, Int) {
        let chars = services[s].characteristics
        let upper = c + 1 < chars.count ? Int(chars[c + 1].declarationHandle) - 1 : Int(services[s].endHandle)
        return (Int(chars[c].valueHandle) + 1, upper)
    }

    private func invalid(_ message: String, _ handle: UInt16? = nil) -> ProcedureStep {
        .done(.failure(GATTClientError(.invalidResponse, message, handle: handle)))
    }

    /// Takes the answer to the request ``next()`` returned.
    mutating func handle(_ pdu: ATTPDU) -> ProcedureStep {
        switch (phase, pdu) {
        case let (.services(cursor), .readByGroupTypeResponse(groups)):
            var at = cursor
            for g in groups {
                guard Int(g.handle) >= at, g.endGroupHandle >= g.handle else {
                    return invalid(
                        "service group \(Hex.handle(g.handle))-\(Hex.handle(g.endGroupHandle)) does not advance past \(handleText(at - 1))",
                        g.handle)
                }
                guard let uuid = BluetoothUUID(littleEndian: g.value[...]) else {
                    return invalid("service at \(Hex.handle(g.handle)) has a \(g.value.count)-byte UUID", g.handle)
                }
                if filter.isEmpty || filter.contains(uuid) {
                    services.append(GATTProfile.Service(uuid: uuid, handle: g.handle, endHandle: g.endGroupHandle))
                }
                at = Int(g.endGroupHandle) + 1
            }
            phase = .services(cursor: at)
        case (.services, .errorResponse(_, _, .attributeNotFound)):
            phase = .services(cursor: 0x10000)

        case let (.characteristics(s, cursor), .readByTypeResponse(entries)):
            let service = services[s]
            var at = cursor ?? Int(service.handle) + 1
            for e in entries {
                guard Int(e.handle) >= at, e.handle <= service.endHandle else {
                    return invalid(
                        "characteristic declaration at \(Hex.handle(e.handle)) is outside \(handleText(at))-\(Hex.handle(service.endHandle))",
                        e.handle)
                }
                var r = ByteReader(e.value)
                guard let properties = r.readUInt8(), let valueHandle = r.readUInt16(),
                    let uuid = BluetoothUUID(littleEndian: r.readRemaining())
                else {
                    return invalid(
                        "characteristic declaration at \(Hex.handle(e.handle)) is \(e.value.count) bytes, not 5 or 19",
                        e.handle)
                }
                guard valueHandle > e.handle, valueHandle <= service.endHandle else {
                    return invalid(
                        "characteristic declared at \(Hex.handle(e.handle)) has its value at \(Hex.handle(valueHandle))",
                        e.handle)
                }
                services[s].characteristics.append(
                    GATTProfile.Characteristic(
                        uuid: uuid, properties: CharacteristicProperties(rawValue: properties),
                        declarationHandle: e.handle, valueHandle: valueHandle))
                at = Int(valueHandle) + 1
            }
            phase = .characteristics(service: s, cursor: at)
        case let (.characteristics(s, _), .errorResponse(_, _, .attributeNotFound)):
            phase = .characteristics(service: s + 1, cursor: nil)

        case let (.descriptors(s, c, cursor), .findInformationResponse(list)):
            let (lower, upper) = descriptorRange(s, c)
            var at = cursor ?? lower
            for d in list {
                guard Int(d.handle) >= at, Int(d.handle) <= upper else {
                    return invalid(
                        "descriptor at \(Hex.handle(d.handle)) is outside \(handleText(at))-\(handleText(upper))",
                        d.handle)
                }
                services[s].characteristics[c].descriptors.append(d)
                if d.uuid == .clientCharacteristicConfiguration, services[s].characteristics[c].cccdHandle == nil {
                    services[s].characteristics[c].cccdHandle = d.handle
                }
                at = Int(d.handle) + 1
            }
            phase = .descriptors(service: s, characteristic: c, cursor: at)
        case let (.descriptors(s, c, _), .errorResponse(_, _, .attributeNotFound)):
            phase = .descriptors(service: s, characteristic: c + 1, cursor: nil)

        case let (_, .errorResponse(request, handle, error)):
            return .done(
                .failure(
                    GATTClientError(
                        .attError, "\(error) at \(Hex.handle(handle)) for \(request) during discovery", attError: error,
                        handle: handle)))
        default:
            return .done(.failure(GATTClientError(.unexpectedResponse, "\(pdu.opcode) does not answer discovery")))
        }
        return next()
    }
}

/// `0x0005`; a cursor past the last handle prints as `0x10000` instead of trapping.
private func handleText(_ cursor: Int) -> String {
    cursor <= 0xFFFF ? Hex.handle(UInt16(cursor)) : "0x" + String(cursor, radix: 16, uppercase: true)
}
