// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffLogging
import Logging
import Transport

/// A client of bluetoothd (`org.bluez`) on the system bus, used from one thread: method calls,
/// the object tree, and the signals it asked for (``addMatch(_:)``), in order.
public final class BlueZBus {
    public let connection: DBusConnection
    public static let service = "org.bluez"

    /// Connects, authenticates and says Hello.
    public init(busPath: String = DBusConnection.systemBusPath(), timeout: Duration = .seconds(5))
        throws(TransportError)
    {
        connection = try DBusConnection(path: busPath)
        do {
            try connection.authenticate(timeout: timeout)
            try connection.hello()
            try connection.acceptSignals(onlyFromOwnerOf: Self.service)
        } catch {
            connection.close()
            throw error
        }
    }

    deinit { connection.close() }

    public func close() { connection.close() }

    /// Whether bluetoothd owns its name on this bus (`NameHasOwner("org.bluez")`).
    public func bluetoothdIsPresent() -> Bool {
        guard
            let r = try? connection.call(DBusConnection.busCall("NameHasOwner", [.string(Self.service)]))
        else { return false }
        return r.body?.first == .boolean(true)
    }

    /// Whether bluetoothd runs and answers on the system bus (what `--backend auto` goes by).
    public static func isAvailable(busPath: String = DBusConnection.systemBusPath()) -> Bool {
        guard let bus = try? BlueZBus(busPath: busPath, timeout: .seconds(2)) else { return false }
        defer { bus.close() }
        // (Connecting asked who owns org.bluez already: no second question.)
        return bus.connection.trustedSender != nil
    }

    /// A method call on bluetoothd; returns the reply's body.
    @discardableResult
    public func call(
        _ path: String, _ interface: String, _ member: String, _ body: [DBusValue] = [],
        timeout: Duration = .seconds(10)
    ) throws(TransportError) -> [DBusValue] {
        let reply = try connection.call(
            .call(destination: Self.service, path: path, interface: interface, member: member, body: body),
            timeout: timeout)
        guard let values = reply.body else {
            throw TransportError(
                .systemCall,
                "bluetoothd's reply to \(member) could not be read: \(reply.bodyError?.description ?? "no body")")
        }
        return values
    }

    /// `org.freedesktop.DBus.AddMatch`.
    public func addMatch(_ rule: String) throws(TransportError) { try connection.addMatch(rule) }

    /// bluetoothd's objects: path → interface → properties (`GetManagedObjects` on `/`).
    public func managedObjects() throws(TransportError) -> [String: [String: DBusValue]] {
        let body = try call("/", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects", timeout: .seconds(10))
        // The whole type, not only its outer dictionary: a tree of another shape would otherwise
        // read as a device without services.
        let expected = "a{oa{sa{sv}}}"
        guard body.count == 1, body[0].signature == expected, let objects = body[0].entries else {
            throw TransportError(
                .systemCall,
                "bluetoothd: GetManagedObjects returned '\(body.map(\.signature).joined())', not '\(expected)'")
        }
        var out: [String: [String: DBusValue]] = [:]
        for (path, interfaces) in objects {
            var byInterface: [String: DBusValue] = [:]
            for (name, props) in interfaces.entries ?? [] { byInterface[name] = props }
            out[path] = byInterface
        }
        return out
    }

    /// A property (`org.freedesktop.DBus.Properties.Get`), unwrapped.
    public func property(_ path: String, _ interface: String, _ name: String) throws(TransportError) -> DBusValue? {
        try call(path, "org.freedesktop.DBus.Properties", "Get", [.string(interface), .string(name)]).first?.unwrapped
    }

    /// The most messages a drain reads at once (`next(until: .now)` in a loop): a bus that keeps
    /// sending (a flood of signals any local user may send) would otherwise hold it for good,
    /// past every timeout and SIGTERM (probe T).
    public static let drainBudget = 256

    /// The next message (signals asked for, calls to our objects), or nil at `deadline`.
    public func next(until deadline: ContinuousClock.Instant?) throws(TransportError) -> DBusMessage? {
        try connection.receive(until: deadline)
    }

    /// ``next(until:)`` for a wait that ends at `deadline`: nil once it has passed, also while
    /// messages keep coming (a bus that keeps sending never let such a wait time out; probe T).
    public func next(before deadline: ContinuousClock.Instant) throws(TransportError) -> DBusMessage? {
        guard ContinuousClock.now < deadline else { return nil }
        return try connection.receive(until: deadline)
    }

    /// Waits until `predicate` holds for a property, polling it and reading signals in between.
    public func wait(
        for path: String, _ interface: String, _ name: String, timeout: Duration, _ predicate: (DBusValue?) -> Bool
    ) throws(TransportError) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if predicate(try property(path, interface, name)) { return true }
            if ContinuousClock.now >= deadline { return false }
            _ = try next(until: min(deadline, .now + .milliseconds(200)))
        }
    }
}

/// `cuff pair` through bluetoothd: `Device1.Pair` with cuff's agent registered on the same
/// connection, so bluetoothd asks *that* agent about this bonding (and no other: it is not made the
/// default agent). One thread: the call's reply and the agent's questions come in on one socket.
public enum BlueZPairing {
    /// Pairs `device` and returns whether it was already paired. When bluetoothd does not know the
    /// device yet, discovers it first; bluetoothd connects itself.
    ///
    /// Success is `Paired` turning true, not only Pair's reply: on a link whose ATT channel another
    /// socket holds, bluetoothd delays that reply until its own service discovery, which then never
    /// runs.
    ///
    /// - Parameter other: messages read meanwhile that are not part of the pairing (signals the
    ///   caller asked for), in order.
    /// - Throws: bluetoothd's error (`org.bluez.Error.AuthenticationFailed`, `…Rejected`, …), the
    ///   device not found, timeout.
    public static func pair(
        _ device: BluetoothAddress, on adapter: BluetoothAdapter, bus: BlueZBus, timeout: Duration = .seconds(40),
        log: Logger, other: (DBusMessage) -> Void = { _ in }
    ) throws(TransportError) -> Bool {
        let devicePath = BlueZPaths.device(device, on: adapter)
        try bus.addMatch(
            "type='signal',sender='org.bluez',interface='org.freedesktop.DBus.Properties',path='\(devicePath)'")
        if try bus.managedObjects()[devicePath]?["org.bluez.Device1"] == nil {
            log.info("bluetoothd does not know \(device) yet; discovering (LE) on \(adapter)")
            try BlueZDiscovery.find(device, on: adapter, bus: bus, timeout: .seconds(30), log: log)
        }
        if try bus.property(devicePath, "org.bluez.Device1", "Paired")?.boolValue == true {
            return true  // bonded already on bluetoothd's side: nothing to ask for

        }
        let attempt = try BlueZPairingAttempt(device, on: adapter, bus: bus, log: log)
        defer { attempt.end() }
        let deadline = ContinuousClock.now + timeout
        while true {
            guard let m = try bus.next(before: deadline) else {
                throw TransportError(.timedOut, "Device1.Pair(\(devicePath)): no answer within \(timeout)")
            }
            if try attempt.handle(m, other: other) { return false }
        }
    }
}

/// One `Device1.Pair` under way, message by message, so an event loop can run it beside other
/// work (``BlueZGATTBearer``'s stepped security) as well as a blocking caller (``BlueZPairing``):
/// cuff's agent registered on the same connection for this call only, the call sent, then each
/// message read is the reply, the `Paired` change, an agent question, or something else.
final class BlueZPairingAttempt {
    let device: BluetoothAddress
    let adapter: BluetoothAdapter
    let scope: AgentScope
    let devicePath: String
    let agentPath = "/cuff/pairing_agent"
    private let bus: BlueZBus
    private let log: Logger
    private var serial: UInt32 = 0
    private var ended = false

    /// Registers the agent and sends `Device1.Pair` (the caller has matched the device's signals).
    init(_ device: BluetoothAddress, on adapter: BluetoothAdapter, bus: BlueZBus, log: Logger) throws(TransportError) {
        self.device = device
        self.adapter = adapter
        self.bus = bus
        self.log = log
        scope = AgentScope(adapter: adapter, device: device)
        devicePath = BlueZPaths.device(device, on: adapter)
        try bus.call(
            "/org/bluez", "org.bluez.AgentManager1", "RegisterAgent",
            [.objectPath(agentPath), .string("NoInputNoOutput")])
        log.info("agent: registered \(agentPath) for this pairing only (\(scope))")
        do {
            serial = try bus.connection.send(
                .call(destination: BlueZBus.service, path: devicePath, interface: "org.bluez.Device1", member: "Pair"))
        } catch {
            end()
            throw error
        }
    }

    /// One message: true once paired; throws when bluetoothd refuses. Messages that are not part
    /// of the pairing go to `other`, in order.
    func handle(_ m: DBusMessage, other: (DBusMessage) -> Void) throws(TransportError) -> Bool {
        if m.replySerial == serial {
            if m.kind == .error {
                var text = ""
                if case .string(let s)? = m.body?.first { text = ": " + s }
                throw TransportError(
                    .securityRefused,
                    "bluetoothd could not pair \(device) on \(adapter): \(m.errorName ?? "error")\(text)",
                    remoteErrorName: m.errorName)
            }
            return true
        }
        if m.kind == .signal {
            if m.path == devicePath, m.member == "PropertiesChanged", let body = m.body, body.count >= 2,
                body[0] == .string("org.bluez.Device1"), body[1]["Paired"]?.boolValue == true
            {
                log.info("bluetoothd: \(device) paired")
                return true
            }
            other(m)
            return false
        }
        if m.kind == .methodCall, m.path == agentPath {
            let (reply, line) = BlueZAgent.response(to: m, path: agentPath, scope: scope)
            if let line { log.info("\(line)") }
            if let reply { try bus.connection.send(reply) }
            return false
        }
        other(m)  // e.g. the reply to a call made before the pairing began
        return false
    }

    /// Unregisters the agent (sent without waiting for the reply). Idempotent.
    func end() {
        guard !ended else { return }
        ended = true
        _ = try? bus.connection.send(
            .call(
                destination: BlueZBus.service, path: "/org/bluez", interface: "org.bluez.AgentManager1",
                member: "UnregisterAgent", body: [.objectPath(agentPath)]))
        log.info("agent: unregistered")
    }
}
