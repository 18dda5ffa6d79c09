// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore

/// The server side of one ATT bearer over an ``AttributeDatabase``, as a value that takes events
/// and returns actions (Core Vol 3 Part F §3.4, Part G §4).
///
/// One instance is one connection: the CCCDs, the MTU, the link security and the indication queue
/// belong to it; ``reset()`` starts a new connection over the same database. The driver sends each
/// ``GATTServerAction/send(_:)`` on the bearer and calls ``tick(now:)`` by ``nextDeadline``.
public struct GATTServer: Sendable {
    /// The LE default and minimum ATT_MTU (Vol 3 Part F §3.2.8).
    public static let minimumMTU: UInt16 = 23
    /// The ATT transaction timeout (Vol 3 Part F §3.3.3).
    public static let transactionTimeout: Duration = .seconds(30)
    /// How long an indication waits for its confirmation on this connection, in the time the
    /// driver passes in: ``transactionTimeout`` unless the driver's clock runs faster than real
    /// time (a simulated cuff at `--speed 6` gets 6 × 30 s of its own time, so the client still
    /// has the 30 real seconds the specification gives it).
    public var transactionTimeoutHere: Duration = transactionTimeout
    /// The longest attribute value (Vol 3 Part F §3.2.9).
    public static let maximumValueLength = 512

    public private(set) var database: AttributeDatabase
    /// The receive MTU this server offers in an Exchange MTU Response, 23...517.
    public var preferredMTU: UInt16 { didSet { preferredMTU = min(max(preferredMTU, Self.minimumMTU), 517) } }
    /// How many indications may wait behind the one in flight.
    public var indicationQueueLimit: Int
    /// The error for a read or write that needs encryption on an unencrypted link.
    /// ``ATTErrorCode/insufficientAuthentication`` fits a peer with no bond; a server that holds
    /// the client's LTK answers ``ATTErrorCode/insufficientEncryption`` (Vol 3 Part C §10.3.2).
    public var unencryptedLinkError: ATTErrorCode = .insufficientAuthentication
    /// Value handles whose Write Requests the application answers itself with
    /// ``respondToWrite(handle:error:)``; the server sends nothing until then.
    public var deferredWriteHandles: Set<UInt16> = []
    /// Checks each application write before it is applied; a non-nil result is sent as the Error
    /// Response (and a rejected Write Command is dropped).
    public var writeValidator: (@Sendable (GATTWriteRequest) -> ATTErrorCode?)?
    /// A CCCD write that sets a bit the characteristic's properties do not allow (notifications
    /// without Notify, indications without Indicate) or a reserved bit is refused with
    /// ``ATTErrorCode/cccdImproperlyConfigured``, as bluetoothd's GATT server refuses it (its
    /// `ccc_write_cb`; it refuses both bits at once too, which the specification allows and this
    /// server accepts when both properties are set). A client that writes by stale handles then
    /// hears of it at once. False: every 2-byte value is taken (a captured cuff served back, which
    /// took what the captured central wrote).
    public var refusesImproperSubscriptions = true
    /// A write takes the form its characteristic's properties allow (Core Vol 3 Part G §3.3.1.1,
    /// Table 3.5): a Write Request to a value without Write is refused with
    /// ``ATTErrorCode/writeNotPermitted``, a Write Command to one without Write Without Response
    /// is dropped (probe R: a command started a measurement on a write-only control point). False:
    /// either form is taken where the attribute is writable (a captured cuff served back, which
    /// took whatever the captured central sent).
    public var enforcesWriteProperties = true

    /// The ATT_MTU in use on this connection.
    public private(set) var mtu: UInt16 = minimumMTU
    /// The client exchanged MTUs on this connection: it may do so only once (Core Vol 3 Part F
    /// §3.4.2.1), and a second request is answered but changes nothing (probe R: a second one with
    /// 23 shrank the MTU under indications queued for the first, which then went out cut).
    private var mtuExchanged = false
    public private(set) var securityLevel: SecurityLevel = .low
    /// True once an indication timed out: no more indications go out on this link.
    public var indicationsStopped: Bool {
        if case .stopped = indications { return true }
        return false
    }

    private var cccds: [UInt16: UInt16] = [:]
    private var indications: Indications = .idle
    /// A Write Request to a handle in ``deferredWriteHandles`` that waits for ``respondToWrite(handle:error:)``.
    private var pendingWrite: Indication?

    /// The link's indications, one in flight at a time (Vol 3 Part F §3.3.3); each case holds
    /// only what it needs.
    private enum Indications: Sendable {
        /// None in flight (and so none queued).
        case idle
        /// `handle`'s indication went out at `sentAt`; `queue` waits behind it, oldest first.
        case inFlight(handle: UInt16, sentAt: Timestamp, queue: [Indication])
        /// One timed out: no more go out on this link.
        case stopped
        /// Only while ``inFlight(handle:sentAt:queue:)``'s queue is changed in place (so it is
        /// not copied); never seen between calls.
        case modifying

        var inFlight: (handle: UInt16, sentAt: Timestamp)? {
            if case let .inFlight(handle, sentAt, _) = self { return (handle, sentAt) }
            return nil
        }
    }

    /// A handle and its value: an indication waiting, or a deferred write.
    private struct Indication: Sendable {
        var handle: UInt16
        var value: [UInt8]
    }

    public init(database: AttributeDatabase, preferredMTU: UInt16 = 247, indicationQueueLimit: Int = 64) {
        self.database = database
        self.preferredMTU = min(max(preferredMTU, Self.minimumMTU), 517)
        self.indicationQueueLimit = indicationQueueLimit
    }

    /// Forgets everything about the connection: CCCDs, MTU, security, queued and in-flight
    /// indications, a deferred write. Attribute values stay.
    public mutating func reset() {
        mtu = Self.minimumMTU
        mtuExchanged = false
        securityLevel = .low
        cccds = [:]
        indications = .idle
        pendingWrite = nil
    }

    /// Sets a CCCD as a bonded client left it on an earlier connection (its value persists across
    /// connections, Core Vol 3 Part G §3.3.3.3): call after ``reset()``.
    public mutating func restoreSubscription(cccdHandle: UInt16, notify: Bool, indicate: Bool) {
        cccds[cccdHandle] = (notify ? 1 : 0) | (indicate ? 2 : 0)
    }

    /// The link's security changed (pairing finished, or encryption started).
    public mutating func linkSecurityChanged(level: SecurityLevel) { securityLevel = level }

    /// Replaces a stored value; false when there is no attribute at `handle`.
    @discardableResult
    public mutating func setValue(handle: UInt16, _ value: [UInt8]) -> Bool {
        database.setValue(value, at: handle)
    }

    /// The CCCD state on this connection of the characteristic whose value is at `valueHandle`.
    public func subscription(valueHandle: UInt16) -> (notify: Bool, indicate: Bool) {
        guard let cccd = database.characteristic(valueHandle: valueHandle)?.cccdHandle else { return (false, false) }
        let bits = cccds[cccd] ?? 0
        return (bits & 1 != 0, bits & 2 != 0)
    }

    /// When ``tick(now:)`` must next be called, nil when no timer runs.
    public var nextDeadline: Timestamp? { indications.inFlight.map { $0.sentAt + transactionTimeoutHere } }

    /// The number of indications waiting behind the one in flight.
    public var queuedIndications: Int {
        if case let .inFlight(_, _, queue) = indications { return queue.count }
        return 0
    }

    // MARK: Server-initiated

    /// Sends a Handle Value Notification if the client enabled notifications, value cut to MTU-3
    /// (Vol 3 Part G §4.10).
    public func notify(handle: UInt16, value: [UInt8], into out: inout [GATTServerAction]) {
        guard let c = database.characteristic(valueHandle: handle), c.properties.contains(.notify) else {
            return out.append(.dropped(handle: handle, reason: .notSupported))
        }
        guard subscription(valueHandle: handle).notify else {
            return out.append(.dropped(handle: handle, reason: .notSubscribed))
        }
        out.append(
            .send(ATTPDU.handleValueNotification(handle: handle, value: Array(value.prefix(Int(mtu) - 3))).bytes))
    }

    /// Sends a Handle Value Indication if the client enabled indications (Vol 3 Part G §4.11).
    ///
    /// Only one indication is in flight; later ones wait in a bounded queue and go out as
    /// confirmations arrive. A full queue drops the indication with ``GATTServerAction/DropReason/queueFull``.
    public mutating func indicate(handle: UInt16, value: [UInt8], now: Timestamp, into out: inout [GATTServerAction]) {
        guard let c = database.characteristic(valueHandle: handle), c.properties.contains(.indicate) else {
            return out.append(.dropped(handle: handle, reason: .notSupported))
        }
        guard !indicationsStopped else { return out.append(.dropped(handle: handle, reason: .transactionTimedOut)) }
        guard subscription(valueHandle: handle).indicate else {
            return out.append(.dropped(handle: handle, reason: .notSubscribed))
        }
        if case .inFlight(let h, let sentAt, var queue) = indications {
            guard queue.count < indicationQueueLimit else {
                return out.append(.dropped(handle: handle, reason: .queueFull))
            }
            indications = .modifying
            queue.append(Indication(handle: handle, value: value))
            indications = .inFlight(handle: h, sentAt: sentAt, queue: queue)
            return
        }
        out.append(sendIndication(handle: handle, value: value, now: now, queue: []))
    }

    /// Takes back the queued indications of `handles` (never the one in flight, which the client
    /// has): a procedure the client aborted. Returns how many were taken back.
    public mutating func withdrawQueuedIndications(handles: Set<UInt16>) -> Int {
        guard case .inFlight(let h, let sentAt, var queue) = indications else { return 0 }
        indications = .modifying
        let before = queue.count
        queue.removeAll { handles.contains($0.handle) }
        indications = .inFlight(handle: h, sentAt: sentAt, queue: queue)
        return before - queue.count
    }

    private mutating func sendIndication(handle: UInt16, value: [UInt8], now: Timestamp, queue: [Indication])
        -> GATTServerAction
    {
        indications = .inFlight(handle: handle, sentAt: now, queue: queue)
        return .send(ATTPDU.handleValueIndication(handle: handle, value: Array(value.prefix(Int(mtu) - 3))).bytes)
    }

    /// The indication in flight was confirmed: sends the next queued one that is still wanted.
    private mutating func sendNextIndication(
        after queue: [Indication], now: Timestamp, into actions: inout [GATTServerAction]
    ) {
        var queue = queue[...]
        indications = .idle
        while let next = queue.popFirst() {
            if subscription(valueHandle: next.handle).indicate {
                actions.append(sendIndication(handle: next.handle, value: next.value, now: now, queue: Array(queue)))
                break
            }
            actions.append(.dropped(handle: next.handle, reason: .notSubscribed))
        }
    }

    /// Checks the indication timer.
    public mutating func tick(now: Timestamp, into out: inout [GATTServerAction]) {
        guard case let .inFlight(handle, sentAt, queue) = indications, now - sentAt >= transactionTimeoutHere else {
            return
        }
        indications = .stopped
        out.append(.indicationTimedOut(handle: handle))
        for q in queue { out.append(.dropped(handle: q.handle, reason: .transactionTimedOut)) }
    }

    /// Answers a deferred Write Request: a Write Response (and the value is stored) when `error`
    /// is nil, else an Error Response with `error`.
    public mutating func respondToWrite(handle: UInt16, error: ATTErrorCode?, into out: inout [GATTServerAction]) {
        guard let pending = pendingWrite, pending.handle == handle else {
            return out.append(.protocolViolation("no deferred write is pending for handle \(Hex.handle(handle))"))
        }
        pendingWrite = nil
        if let error {
            return out.append(.send(ATTPDU.errorResponse(request: .writeRequest, handle: handle, error: error).bytes))
        }
        database.setValue(pending.value, at: handle)
        out.append(.send(ATTPDU.writeResponse.bytes))
    }

    // MARK: Client PDUs

    /// Handles one PDU from the client.
    public mutating func receive(_ pdu: [UInt8], now: Timestamp, into out: inout [GATTServerAction]) {
        let parsed: ATTPDU
        do {
            parsed = try ATTPDU(parsing: pdu)
        } catch {
            guard let op = error.opcode, op.isRequest else { return out.append(.protocolViolation(error.description)) }
            return out.append(reject(op, 0, .invalidPDU))
        }
        if parsed.opcode.isRequest, let pending = pendingWrite {
            return out.append(
                .protocolViolation(
                    "\(parsed.opcode) while the Write Request for \(Hex.handle(pending.handle)) awaits its response"))
        }
        switch parsed {
        case let .exchangeMTURequest(clientMTU):
            if !mtuExchanged {
                mtu = max(Self.minimumMTU, min(clientMTU, preferredMTU))
                mtuExchanged = true
            }
            out.append(.send(ATTPDU.exchangeMTUResponse(serverMTU: preferredMTU).bytes))
        case let .findInformationRequest(start, end):
            out.append(findInformation(start, end))
        case let .findByTypeValueRequest(start, end, type, value):
            out.append(findByTypeValue(start, end, BluetoothUUID(type), value))
        case let .readByTypeRequest(start, end, type):
            out.append(readByType(start, end, type))
        case let .readByGroupTypeRequest(start, end, type):
            out.append(readByGroupType(start, end, type))
        case let .readRequest(handle):
            out.append(read(.readRequest, handle, offset: 0))
        case let .readBlobRequest(handle, offset):
            out.append(read(.readBlobRequest, handle, offset: Int(offset)))
        case let .writeRequest(handle, value):
            write(handle, value, withResponse: true, &out)
        case let .writeCommand(handle, value):
            write(handle, value, withResponse: false, &out)
        case .handleValueConfirmation:
            guard case let .inFlight(handle, _, queue) = indications else {
                return out.append(.protocolViolation("Handle Value Confirmation (0x1E) with no indication in flight"))
            }
            out.append(.indicationConfirmed(handle: handle))
            sendNextIndication(after: queue, now: now, into: &out)
        case let .unknown(opcode, _):
            // A request (or an opcode nobody defined, without the command flag) gets Request Not
            // Supported; a command is ignored; a response the server never asked for is the
            // client's mistake, not a request to answer (§3.4.1.1).
            if opcode.isRequest {
                out.append(reject(opcode, 0, .requestNotSupported))
            } else if !opcode.isCommand {
                out.append(.protocolViolation("\(opcode) is not something a client sends"))
            }
        default:
            out.append(.protocolViolation("\(parsed.opcode) is not something a client sends"))
        }
    }

    private func reject(_ request: ATTOpcode, _ handle: UInt16, _ error: ATTErrorCode) -> GATTServerAction {
        .send(ATTPDU.errorResponse(request: request, handle: handle, error: error).bytes)
    }

    /// The value a client sees: CCCDs are per connection.
    private func currentValue(_ a: Attribute) -> [UInt8] {
        guard a.type == .clientCharacteristicConfiguration else { return a.value }
        let bits = cccds[a.handle] ?? 0
        return [UInt8(truncatingIfNeeded: bits), UInt8(truncatingIfNeeded: bits >> 8)]
    }

    private func securityError(encrypted: Bool, authenticated: Bool) -> ATTErrorCode? {
        if (encrypted || authenticated), securityLevel < .medium { return unencryptedLinkError }
        if authenticated, securityLevel < .high { return .insufficientAuthentication }
        return nil
    }

    private func readError(_ a: Attribute) -> ATTErrorCode? {
        guard a.permissions.contains(.read) else { return .readNotPermitted }
        return securityError(
            encrypted: a.permissions.contains(.readEncrypted),
            authenticated: a.permissions.contains(.readAuthenticated))
    }

    private func writeError(_ a: Attribute) -> ATTErrorCode? {
        guard a.permissions.contains(.write) else { return .writeNotPermitted }
        return securityError(
            encrypted: a.permissions.contains(.writeEncrypted),
            authenticated: a.permissions.contains(.writeAuthenticated))
    }

    /// Attributes in `start...end`, or the error for a bad range (§3.4.3.1: start 0 or start > end).
    private func range(_ request: ATTOpcode, _ start: UInt16, _ end: UInt16) -> Result<ArraySlice<Attribute>, ErrorPDU>
    {
        guard start != 0, start <= end else { return .failure(ErrorPDU(request, start, .invalidHandle)) }
        return .success(database.attributes(in: start, end))
    }

    private struct ErrorPDU: Error {
        var action: GATTServerAction
        init(_ request: ATTOpcode, _ handle: UInt16, _ error: ATTErrorCode) {
            action = .send(ATTPDU.errorResponse(request: request, handle: handle, error: error).bytes)
        }
    }

    /// §3.4.3.1–2: handles and types, all of one UUID size, as many as fit.
    private func findInformation(_ start: UInt16, _ end: UInt16) -> GATTServerAction {
        let attrs: ArraySlice<Attribute>
        switch range(.findInformationRequest, start, end) {
        case let .success(a): attrs = a
        case let .failure(e): return e.action
        }
        guard let first = attrs.first else { return reject(.findInformationRequest, start, .attributeNotFound) }
        let short = first.type.uuid16 != nil
        let capacity = (Int(mtu) - 2) / (short ? 4 : 18)
        let list = attrs.prefix { ($0.type.uuid16 != nil) == short }.prefix(capacity)
            .map { ATTPDU.HandleUUID(handle: $0.handle, uuid: $0.type) }
        return .send(ATTPDU.findInformationResponse(list).bytes)
    }

    /// §3.4.3.3–4: attributes of `type` whose value equals `value`, with their group ends.
    private func findByTypeValue(_ start: UInt16, _ end: UInt16, _ type: BluetoothUUID, _ value: [UInt8])
        -> GATTServerAction
    {
        let attrs: ArraySlice<Attribute>
        switch range(.findByTypeValueRequest, start, end) {
        case let .success(a): attrs = a
        case let .failure(e): return e.action
        }
        let capacity = (Int(mtu) - 1) / 4
        let list = attrs.filter { $0.type == type && readError($0) == nil && $0.value == value }.prefix(capacity).map {
            a in
            let groupEnd = database.services.first { $0.handle == a.handle }?.endHandle ?? a.handle
            return ATTPDU.HandlesInformation(foundHandle: a.handle, groupEndHandle: groupEnd)
        }
        guard !list.isEmpty else { return reject(.findByTypeValueRequest, start, .attributeNotFound) }
        return .send(ATTPDU.findByTypeValueResponse(list).bytes)
    }

    /// §3.4.4.1–2: values of `type`; a first match the client may not read is an error, later ones
    /// end the list, as does a value of another length.
    private func readByType(_ start: UInt16, _ end: UInt16, _ type: BluetoothUUID) -> GATTServerAction {
        let attrs: ArraySlice<Attribute>
        switch range(.readByTypeRequest, start, end) {
        case let .success(a): attrs = a
        case let .failure(e): return e.action
        }
        let matches = attrs.filter { $0.type == type }
        guard let first = matches.first else { return reject(.readByTypeRequest, start, .attributeNotFound) }
        if let error = readError(first) { return reject(.readByTypeRequest, first.handle, error) }
        let cut = min(Int(mtu) - 4, 253)
        let size = min(currentValue(first).count, cut)
        var list: [ATTPDU.HandleValue] = []
        var used = 2
        for a in matches {
            let value = currentValue(a).prefix(cut)
            guard readError(a) == nil, value.count == size, used + 2 + size <= Int(mtu) else { break }
            list.append(ATTPDU.HandleValue(handle: a.handle, value: Array(value)))
            used += 2 + size
        }
        return .send(ATTPDU.readByTypeResponse(list).bytes)
    }

    /// §3.4.4.9–10: service groups of `type` (only «Primary Service» and «Secondary Service» group).
    private func readByGroupType(_ start: UInt16, _ end: UInt16, _ type: BluetoothUUID) -> GATTServerAction {
        switch range(.readByGroupTypeRequest, start, end) {
        case .success: break
        case let .failure(e): return e.action
        }
        guard type == .primaryService || type == .secondaryService else {
            return reject(.readByGroupTypeRequest, start, .unsupportedGroupType)
        }
        let primary = type == .primaryService
        let groups = database.services.filter { $0.isPrimary == primary && start <= $0.handle && $0.handle <= end }
        guard let first = groups.first else { return reject(.readByGroupTypeRequest, start, .attributeNotFound) }
        let size = min(first.uuid.littleEndianBytes.count, min(Int(mtu) - 6, 251))
        var list: [ATTPDU.GroupValue] = []
        var used = 2
        for g in groups {
            let value = g.uuid.littleEndianBytes
            guard value.count == size, used + 4 + size <= Int(mtu) else { break }
            list.append(ATTPDU.GroupValue(handle: g.handle, endGroupHandle: g.endHandle, value: value))
            used += 4 + size
        }
        return .send(ATTPDU.readByGroupTypeResponse(list).bytes)
    }

    /// §3.4.4.3–6: a value from `offset`, cut to MTU-1.
    private func read(_ request: ATTOpcode, _ handle: UInt16, offset: Int) -> GATTServerAction {
        guard let a = database.attribute(handle) else { return reject(request, handle, .invalidHandle) }
        if let error = readError(a) { return reject(request, handle, error) }
        let value = currentValue(a)
        guard offset <= value.count else { return reject(request, handle, .invalidOffset) }
        let part = Array(value[offset...].prefix(Int(mtu) - 1))
        return .send(
            (request == .readRequest ? ATTPDU.readResponse(value: part) : .readBlobResponse(value: part)).bytes)
    }

    /// §3.4.5.1–3: a Write Request or Write Command. Commands never get a response.
    private mutating func write(_ handle: UInt16, _ value: [UInt8], withResponse: Bool, _ out: inout [GATTServerAction])
    {
        func fail(_ error: ATTErrorCode) {
            if withResponse { out.append(reject(.writeRequest, handle, error)) }
        }
        guard let a = database.attribute(handle) else { return fail(.invalidHandle) }
        if let error = writeError(a) { return fail(error) }
        if enforcesWriteProperties, let c = database.characteristic(valueHandle: handle),
            !c.properties.contains(withResponse ? .write : .writeWithoutResponse)
        {
            return fail(.writeNotPermitted)
        }
        guard value.count <= Self.maximumValueLength else { return fail(.invalidAttributeValueLength) }
        let ok = GATTServerAction.send(ATTPDU.writeResponse.bytes)

        if a.type == .clientCharacteristicConfiguration, let c = database.characteristic(cccdHandle: handle) {
            guard value.count == 2 else { return fail(.invalidAttributeValueLength) }
            let bits = UInt16(value[0]) | UInt16(value[1]) << 8
            if refusesImproperSubscriptions,
                bits > 3 || (bits & 1 != 0 && !c.properties.contains(.notify))
                    || (bits & 2 != 0 && !c.properties.contains(.indicate))
            {
                return fail(.cccdImproperlyConfigured)
            }
            cccds[handle] = bits
            if withResponse { out.append(ok) }
            return out.append(
                .subscriptionChanged(
                    valueHandle: c.valueHandle, uuid: c.uuid,
                    notify: bits & 1 != 0, indicate: bits & 2 != 0))
        }

        let state = subscription(valueHandle: handle)
        let request = GATTWriteRequest(
            handle: handle, uuid: a.type, value: value, withResponse: withResponse,
            notifyEnabled: state.notify, indicateEnabled: state.indicate)
        if let error = writeValidator?(request) { return fail(error) }
        let written = GATTServerAction.written(handle: handle, uuid: a.type, value: value, withResponse: withResponse)
        if withResponse, deferredWriteHandles.contains(handle) {
            pendingWrite = Indication(handle: handle, value: value)
            return out.append(written)
        }
        database.setValue(value, at: handle)
        if withResponse { out.append(ok) }
        out.append(written)
    }
}

/// The array-returning forms (tests, and drivers off the hot path): each is its `into:` form
/// into a new array.
extension GATTServer {
    public func notify(handle: UInt16, value: [UInt8]) -> [GATTServerAction] {
        var out: [GATTServerAction] = []
        notify(handle: handle, value: value, into: &out)
        return out
    }

    public mutating func indicate(handle: UInt16, value: [UInt8], now: Timestamp) -> [GATTServerAction] {
        var out: [GATTServerAction] = []
        indicate(handle: handle, value: value, now: now, into: &out)
        return out
    }

    public mutating func tick(now: Timestamp) -> [GATTServerAction] {
        var out: [GATTServerAction] = []
        tick(now: now, into: &out)
        return out
    }

    public mutating func respondToWrite(handle: UInt16, error: ATTErrorCode?) -> [GATTServerAction] {
        var out: [GATTServerAction] = []
        respondToWrite(handle: handle, error: error, into: &out)
        return out
    }

    public mutating func receive(_ pdu: [UInt8], now: Timestamp) -> [GATTServerAction] {
        var out: [GATTServerAction] = []
        receive(pdu, now: now, into: &out)
        return out
    }
}
