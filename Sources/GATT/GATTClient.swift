// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// The client side of one ATT bearer, as a value that takes events and returns actions
/// (Core Vol 3 Part F §3.3, Part G §4).
///
/// Procedures wait in a queue and run one at a time, with at most one request on the air
/// (Part F §3.3.2). Each gets a ``GATTRequestID`` and finishes with
/// ``GATTClientAction/completed(_:_:)``. The driver sends every ``GATTClientAction/send(_:)``,
/// feeds every PDU to ``receive(_:now:)`` and calls ``tick(now:)`` by ``nextDeadline``.
///
/// Indications are not confirmed automatically: the application calls ``confirmIndication()``
/// once it has kept the value, so a server never drops a record the client has not stored.
public struct GATTClient: Sendable {
    /// Core Vol 3 Part F §3.3.3.
    public static let transactionTimeout: Duration = .seconds(30)

    /// The receive MTU this client offers in Exchange MTU.
    public let preferredMTU: UInt16
    /// The ATT_MTU in use.
    public private(set) var mtu: UInt16 = GATTServer.minimumMTU
    /// The link security the client believes it has.
    public private(set) var securityLevel: SecurityLevel
    /// Set after a fatal error; the bearer must be closed.
    public private(set) var failure: GATTClientError?
    /// True while an indication waits for ``confirmIndication()``.
    public private(set) var indicationPending = false
    /// ATT requests sent so far (each Exchange MTU, discovery, read, read blob and write request
    /// on the air, a request sent again after a security raise too; not commands or confirmations).
    public private(set) var requestsSent = 0

    private var nextID = 1
    private var queue: [Running] = []
    private var current: Running?
    /// The request of the running procedure, if it has one: on the air, or held back while the
    /// link's security is raised.
    private var request: Request = .none

    /// Where the running procedure's request is; each case holds only what that stage needs.
    private enum Request: Sendable {
        /// No request is on the air.
        case none
        /// `pdu` went out at `sentAt`; its answer is due within ``GATTClient/transactionTimeout``.
        case onTheAir(ATTPDU, sentAt: Timestamp)
        /// The server answered `pdu` with a security error (`error` at `handle`): it goes out
        /// again once the link has `level` (no transaction timer runs meanwhile).
        case awaitingSecurity(ATTPDU, SecurityTarget)

        /// The request on the air and when it was sent, if one is.
        var onTheAir: (pdu: ATTPDU, sentAt: Timestamp)? {
            if case let .onTheAir(pdu, sentAt) = self { return (pdu, sentAt) }
            return nil
        }
    }

    private struct SecurityTarget: Sendable {
        var level: SecurityLevel
        var error: ATTErrorCode
        var handle: UInt16
    }

    public init(preferredMTU: UInt16 = 247, securityLevel: SecurityLevel = .low) {
        self.preferredMTU = min(max(preferredMTU, GATTServer.minimumMTU), 517)
        self.securityLevel = securityLevel
    }

    /// When ``tick(now:)`` must next be called, nil when no request is on the air.
    public var nextDeadline: Timestamp? { request.onTheAir.map { $0.sentAt + Self.transactionTimeout } }

    /// Procedures queued or running.
    public var pendingProcedures: Int { queue.count + (current == nil ? 0 : 1) }

    // MARK: Procedures
    //
    // Each appends its actions to `out` (the ActionMachine convention) and returns the procedure's
    // ID; the forms that return `(id, actions)` are in an extension, for tests.

    /// Exchange MTU (Part G §4.3.1). Completes with ``GATTClientResponse/mtu(_:)``; a server
    /// that does not support it leaves the MTU at 23.
    public mutating func exchangeMTU(now: Timestamp, into out: inout [GATTClientAction]) -> GATTRequestID {
        submit(.exchangeMTU, now: now, into: &out)
    }

    /// Discovers primary services (all, or only those in `services`), their characteristics and
    /// descriptors (Part G §4.4.1, §4.6.1, §4.7.1). Completes with ``GATTClientResponse/profile(_:)``.
    public mutating func discover(
        services: [BluetoothUUID] = [], now: Timestamp, into out: inout [GATTClientAction]
    ) -> GATTRequestID {
        submit(.discover(Discovery(filter: services)), now: now, into: &out)
    }

    /// Reads a value, long ones with Read Blob (Part G §4.8.1, §4.8.3), up to 512 bytes.
    public mutating func read(_ handle: UInt16, now: Timestamp, into out: inout [GATTClientAction]) -> GATTRequestID {
        submit(.read(handle: handle, value: []), now: now, into: &out)
    }

    /// Reads the first value of characteristic type `type` in `start...end` (Read Using
    /// Characteristic UUID, Part G §4.8.2), as a client reads the Database Hash whose handle it may
    /// not know. Completes with ``GATTClientResponse/value(_:)``; with Attribute Not Found when the
    /// server has none.
    public mutating func read(
        type: BluetoothUUID, from start: UInt16 = 0x0001, to end: UInt16 = 0xFFFF, now: Timestamp,
        into out: inout [GATTClientAction]
    ) -> GATTRequestID {
        submit(.readByType(type: type, start: start, end: end), now: now, into: &out)
    }

    /// Writes a value that fits in one Write Request (Part G §4.9.3).
    public mutating func write(
        _ handle: UInt16, _ value: [UInt8], now: Timestamp, into out: inout [GATTClientAction]
    ) -> GATTRequestID {
        submit(.write(handle: handle, value: value), now: now, into: &out)
    }

    /// Writes the CCCD at `cccdHandle` (Part G §3.3.3.3).
    public mutating func subscribe(
        cccdHandle: UInt16, notify: Bool, indicate: Bool, now: Timestamp, into out: inout [GATTClientAction]
    ) -> GATTRequestID {
        write(cccdHandle, [(notify ? 1 : 0) | (indicate ? 2 : 0), 0], now: now, into: &out)
    }

    /// Writes a discovered characteristic's CCCD; fails with ``GATTClientError/Code/noCCCD`` when it has none.
    public mutating func subscribe(
        _ characteristic: GATTProfile.Characteristic, notify: Bool, indicate: Bool, now: Timestamp,
        into out: inout [GATTClientAction]
    ) -> GATTRequestID {
        guard let cccd = characteristic.cccdHandle else {
            let id = makeID()
            out.append(
                .completed(
                    id,
                    .failure(
                        GATTClientError(
                            .noCCCD,
                            "characteristic \(characteristic.uuid) at \(Hex.handle(characteristic.valueHandle)) has no CCCD",
                            handle: characteristic.valueHandle))))
            return id
        }
        return subscribe(cccdHandle: cccd, notify: notify, indicate: indicate, now: now, into: &out)
    }

    /// Sends a Write Command at once (commands are not subject to the one-request rule, §3.3.2)
    /// and completes immediately.
    public mutating func writeWithoutResponse(
        _ handle: UInt16, _ value: [UInt8], into out: inout [GATTClientAction]
    ) -> GATTRequestID {
        let id = makeID()
        if let failure {
            out.append(.completed(id, .failure(bearerFailed(failure))))
            return id
        }
        guard value.count <= Int(mtu) - 3 else {
            out.append(.completed(id, .failure(tooLong(handle, value))))
            return id
        }
        out.append(.send(ATTPDU.writeCommand(handle: handle, value: value).bytes))
        out.append(.completed(id, .success(.written)))
        return id
    }

    /// Confirms the pending indication (Part F §3.4.7.3); no action when none is pending.
    public mutating func confirmIndication(into out: inout [GATTClientAction]) {
        guard indicationPending, failure == nil else { return }
        indicationPending = false
        out.append(.send(ATTPDU.handleValueConfirmation.bytes))
    }

    // MARK: Security

    /// The link now has `level`: the request that asked for it goes out again, or fails when the
    /// level is still too low. Also call it when the caller raised security on its own, so later
    /// step-ups start from the right level.
    public mutating func securityRaised(level: SecurityLevel, now: Timestamp, into out: inout [GATTClientAction]) {
        securityLevel = level
        guard case let .awaitingSecurity(pdu, target) = request else { return }
        guard level >= target.level else {
            request = .none
            return finish(
                .failure(
                    GATTClientError(
                        .attError,
                        "\(target.error) at \(Hex.handle(target.handle)) persists: link raised to \(level), not \(target.level)",
                        attError: target.error, handle: target.handle)), now: now, into: &out)
        }
        request = .onTheAir(pdu, sentAt: now)
        requestsSent += 1
        out.append(.send(pdu.bytes))
    }

    /// The caller could not or would not raise security: the waiting procedure fails.
    public mutating func securityRefused(now: Timestamp, into out: inout [GATTClientAction]) {
        guard case let .awaitingSecurity(_, target) = request else { return }
        request = .none
        finish(
            .failure(
                GATTClientError(
                    .securityRefused,
                    "\(target.error) at \(Hex.handle(target.handle)): security not raised to \(target.level)",
                    attError: target.error, handle: target.handle)), now: now, into: &out)
    }

    /// BlueZ's policy (src/shared/att.c): 0x0F asks for encryption; 0x05 and 0x0C step up a level.
    static func level(after error: ATTErrorCode, at level: SecurityLevel) -> SecurityLevel? {
        switch error {
        case .insufficientEncryption:
            return level < .medium ? .medium : nil
        case .insufficientAuthentication, .insufficientEncryptionKeySize:
            return SecurityLevel(rawValue: level.rawValue + 1)
        default:
            return nil
        }
    }

    // MARK: Events

    /// Checks the transaction timer.
    public mutating func tick(now: Timestamp, into out: inout [GATTClientAction]) {
        guard failure == nil, case let (pdu, sent)? = request.onTheAir, now - sent >= Self.transactionTimeout else {
            return
        }
        fail(GATTClientError(.timeout, "no answer to \(pdu.opcode) within 30 s"), into: &out)
    }

    /// Handles one PDU from the server.
    public mutating func receive(_ bytes: [UInt8], now: Timestamp, into out: inout [GATTClientAction]) {
        guard failure == nil else { return }
        tick(now: now, into: &out)
        // The transaction timer ran out: `tick` failed the client.
        guard failure == nil else { return }
        guard bytes.count <= Int(mtu) else {
            return fail(
                GATTClientError(
                    .pduTooLarge, "\(bytes.count)-byte PDU (opcode 0x\(hex2(bytes[0]))) exceeds ATT_MTU \(mtu)"),
                into: &out)
        }
        let pdu: ATTPDU
        do {
            pdu = try ATTPDU(parsing: bytes)
        } catch {
            return fail(GATTClientError(.malformedPDU, error.description), into: &out)
        }
        switch pdu {
        case let .handleValueNotification(handle, value):
            out.append(.notification(handle: handle, value: value))
        case let .handleValueIndication(handle, value):
            guard !indicationPending else {
                return fail(
                    GATTClientError(
                        .unconfirmedIndication,
                        "indication of \(Hex.handle(handle)) arrived before the previous one was confirmed",
                        handle: handle), into: &out)
            }
            indicationPending = true
            out.append(.indication(handle: handle, value: value))
        case let .exchangeMTURequest(serverMTU):
            // The peer's client role asks; answer for our (empty) server role.
            mtu = max(GATTServer.minimumMTU, min(serverMTU, preferredMTU))
            out.append(.send(ATTPDU.exchangeMTUResponse(serverMTU: preferredMTU).bytes))
        case let .unknown(opcode, _) where opcode.isCommand:
            return
        case .writeCommand:
            return
        default:
            if pdu.opcode.isRequest {
                // This client has no attribute database of its own.
                return out.append(
                    .send(ATTPDU.errorResponse(request: pdu.opcode, handle: 0, error: .requestNotSupported).bytes))
            }
            response(pdu, now: now, into: &out)
        }
    }

    // MARK: Internals

    private enum Procedure: Sendable {
        case exchangeMTU
        case discover(Discovery)
        case read(handle: UInt16, value: [UInt8])
        case readByType(type: BluetoothUUID, start: UInt16, end: UInt16)
        case write(handle: UInt16, value: [UInt8])
    }

    private struct Running: Sendable {
        var id: GATTRequestID
        var procedure: Procedure
    }

    private mutating func makeID() -> GATTRequestID {
        defer { nextID += 1 }
        return GATTRequestID(rawValue: nextID)
    }

    private func bearerFailed(_ cause: GATTClientError) -> GATTClientError {
        GATTClientError(.bearerFailed, "the bearer failed earlier: \(cause.message)")
    }

    private func tooLong(_ handle: UInt16, _ value: [UInt8]) -> GATTClientError {
        GATTClientError(
            .valueTooLong, "\(value.count)-byte value for \(Hex.handle(handle)) exceeds ATT_MTU \(mtu) - 3",
            handle: handle)
    }

    private mutating func submit(_ procedure: Procedure, now: Timestamp, into out: inout [GATTClientAction])
        -> GATTRequestID
    {
        let id = makeID()
        if let failure {
            out.append(.completed(id, .failure(bearerFailed(failure))))
            return id
        }
        queue.append(Running(id: id, procedure: procedure))
        pump(now: now, into: &out)
        return id
    }

    /// Starts queued procedures until one has a request on the air (iteratively: a long queue of
    /// procedures that complete at once does not recurse).
    private mutating func pump(now: Timestamp, into actions: inout [GATTClientAction]) {
        while current == nil, !queue.isEmpty {
            var running = queue.removeFirst()
            let step = start(&running.procedure)
            current = running
            switch step {
            case let .send(pdu):
                request = .onTheAir(pdu, sentAt: now)
                requestsSent += 1
                actions.append(.send(pdu.bytes))
            case let .done(result):
                complete(result, into: &actions)
            }
        }
    }

    /// Sends a step's request, or completes the current procedure and starts the next.
    private mutating func apply(_ step: ProcedureStep, now: Timestamp, into out: inout [GATTClientAction]) {
        switch step {
        case let .send(pdu):
            request = .onTheAir(pdu, sentAt: now)
            requestsSent += 1
            out.append(.send(pdu.bytes))
        case let .done(result):
            finish(result, now: now, into: &out)
        }
    }

    /// Completes the current procedure and starts the next.
    private mutating func finish(
        _ result: Result<GATTClientResponse, GATTClientError>, now: Timestamp, into out: inout [GATTClientAction]
    ) {
        complete(result, into: &out)
        pump(now: now, into: &out)
    }

    private mutating func complete(
        _ result: Result<GATTClientResponse, GATTClientError>, into out: inout [GATTClientAction]
    ) {
        request = .none
        guard let done = current else { return }
        current = nil
        out.append(.completed(done.id, result))
    }

    /// Completes every procedure with `error` and stops the client.
    private mutating func fail(_ error: GATTClientError, into out: inout [GATTClientAction]) {
        failure = error
        request = .none
        if let current { out.append(.completed(current.id, .failure(error))) }
        for queued in queue { out.append(.completed(queued.id, .failure(bearerFailed(error)))) }
        current = nil
        queue = []
        out.append(.failed(error))
    }

    private func start(_ procedure: inout Procedure) -> ProcedureStep {
        switch procedure {
        case .exchangeMTU:
            return .send(.exchangeMTURequest(clientMTU: preferredMTU))
        case var .discover(d):
            let step = d.next()
            procedure = .discover(d)
            return step
        case let .read(handle, _):
            return .send(.readRequest(handle: handle))
        case let .readByType(type, start, end):
            return .send(.readByTypeRequest(start: start, end: end, type: type))
        case let .write(handle, value):
            guard value.count <= Int(mtu) - 3 else { return .done(.failure(tooLong(handle, value))) }
            return .send(.writeRequest(handle: handle, value: value))
        }
    }

    /// A response to the request on the air.
    private mutating func response(_ pdu: ATTPDU, now: Timestamp, into out: inout [GATTClientAction]) {
        guard let sent = request.onTheAir, var running = current else {
            return fail(
                GATTClientError(.unexpectedResponse, "unsolicited \(pdu.opcode): no request is outstanding"), into: &out
            )
        }
        let asked = sent.pdu.opcode
        if case let .errorResponse(request, handle, error) = pdu {
            guard request == asked else {
                return fail(
                    GATTClientError(
                        .unexpectedResponse,
                        "Error Response (\(error)) for \(request) while \(asked) is outstanding", handle: handle),
                    into: &out)
            }
            if error.isSecurityError {
                guard let target = Self.level(after: error, at: securityLevel) else {
                    return finish(
                        .failure(
                            GATTClientError(
                                .attError,
                                "\(error) at \(Hex.handle(handle)) for \(asked), and the link is already \(securityLevel)",
                                attError: error, handle: handle)), now: now, into: &out)
                }
                self.request = .awaitingSecurity(sent.pdu, SecurityTarget(level: target, error: error, handle: handle))
                return out.append(.raiseSecurity(to: target))
            }
        } else if pdu.opcode != asked.responseOpcode {
            return fail(GATTClientError(.unexpectedResponse, "\(pdu.opcode) in answer to \(asked)"), into: &out)
        }
        let step = advance(&running.procedure, with: pdu)
        current = running
        apply(step, now: now, into: &out)
    }

    /// Moves a procedure on with the answer to its request.
    private mutating func advance(_ procedure: inout Procedure, with pdu: ATTPDU) -> ProcedureStep {
        switch (procedure, pdu) {
        case let (.exchangeMTU, .exchangeMTUResponse(serverMTU)):
            mtu = max(GATTServer.minimumMTU, min(serverMTU, preferredMTU))
            return .done(.success(.mtu(mtu)))
        case (.exchangeMTU, .errorResponse(_, _, .requestNotSupported)):
            return .done(.success(.mtu(mtu)))

        case (.discover(var d), let pdu):
            let step = d.handle(pdu)
            procedure = .discover(d)
            return step

        case let (.read(handle, sofar), .readResponse(value)),
            let (.read(handle, sofar), .readBlobResponse(value)):
            var all = sofar + value
            if all.count > GATTServer.maximumValueLength { all = Array(all.prefix(GATTServer.maximumValueLength)) }
            procedure = .read(handle: handle, value: all)
            // A full PDU may mean more follows (Part G §4.8.3).
            guard value.count == Int(mtu) - 1, all.count < GATTServer.maximumValueLength else {
                return .done(.success(.value(all)))
            }
            return .send(.readBlobRequest(handle: handle, offset: UInt16(all.count)))
        case let (.read(_, value), .errorResponse(.readBlobRequest, _, error))
        where error == .attributeNotLong || error == .invalidOffset:
            // The value ended exactly at a PDU boundary.
            return .done(.success(.value(value)))

        case let (.readByType, .readByTypeResponse(list)):
            guard let first = list.first else {
                return .done(.failure(GATTClientError(.invalidResponse, "an empty Read By Type Response")))
            }
            return .done(.success(.value(first.value)))

        case (.write, .writeResponse):
            return .done(.success(.written))

        case let (_, .errorResponse(request, handle, error)):
            return .done(
                .failure(
                    GATTClientError(
                        .attError, "\(error) at \(Hex.handle(handle)) for \(request)", attError: error, handle: handle))
            )
        default:
            return .done(.failure(GATTClientError(.unexpectedResponse, "\(pdu.opcode) does not answer this procedure")))
        }
    }
}

/// The array-returning forms (tests, and drivers off the hot path): each is its `into:` form
/// into a new array.
extension GATTClient {
    public typealias Submitted = (id: GATTRequestID, actions: [GATTClientAction])

    public mutating func exchangeMTU(now: Timestamp) -> Submitted {
        var out: [GATTClientAction] = []
        let id = exchangeMTU(now: now, into: &out)
        return (id, out)
    }

    public mutating func discover(services: [BluetoothUUID] = [], now: Timestamp) -> Submitted {
        var out: [GATTClientAction] = []
        let id = discover(services: services, now: now, into: &out)
        return (id, out)
    }

    public mutating func read(_ handle: UInt16, now: Timestamp) -> Submitted {
        var out: [GATTClientAction] = []
        let id = read(handle, now: now, into: &out)
        return (id, out)
    }

    public mutating func read(type: BluetoothUUID, from start: UInt16 = 0x0001, to end: UInt16 = 0xFFFF, now: Timestamp)
        -> Submitted
    {
        var out: [GATTClientAction] = []
        let id = read(type: type, from: start, to: end, now: now, into: &out)
        return (id, out)
    }

    public mutating func write(_ handle: UInt16, _ value: [UInt8], now: Timestamp) -> Submitted {
        var out: [GATTClientAction] = []
        let id = write(handle, value, now: now, into: &out)
        return (id, out)
    }

    public mutating func subscribe(cccdHandle: UInt16, notify: Bool, indicate: Bool, now: Timestamp) -> Submitted {
        var out: [GATTClientAction] = []
        let id = subscribe(cccdHandle: cccdHandle, notify: notify, indicate: indicate, now: now, into: &out)
        return (id, out)
    }

    public mutating func subscribe(
        _ characteristic: GATTProfile.Characteristic, notify: Bool, indicate: Bool, now: Timestamp
    ) -> Submitted {
        var out: [GATTClientAction] = []
        let id = subscribe(characteristic, notify: notify, indicate: indicate, now: now, into: &out)
        return (id, out)
    }

    public mutating func writeWithoutResponse(_ handle: UInt16, _ value: [UInt8]) -> Submitted {
        var out: [GATTClientAction] = []
        let id = writeWithoutResponse(handle, value, into: &out)
        return (id, out)
    }

    public mutating func confirmIndication() -> [GATTClientAction] {
        var out: [GATTClientAction] = []
        confirmIndication(into: &out)
        return out
    }

    public mutating func securityRaised(level: SecurityLevel, now: Timestamp) -> [GATTClientAction] {
        var out: [GATTClientAction] = []
        securityRaised(level: level, now: now, into: &out)
        return out
    }

    public mutating func securityRefused(now: Timestamp) -> [GATTClientAction] {
        var out: [GATTClientAction] = []
        securityRefused(now: now, into: &out)
        return out
    }

    public mutating func tick(now: Timestamp) -> [GATTClientAction] {
        var out: [GATTClientAction] = []
        tick(now: now, into: &out)
        return out
    }

    public mutating func receive(_ bytes: [UInt8], now: Timestamp) -> [GATTClientAction] {
        var out: [GATTClientAction] = []
        receive(bytes, now: now, into: &out)
        return out
    }
}
