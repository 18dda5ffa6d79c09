// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffLogging
import Glibc
import Logging
import Transport

/// The steps of connecting to a device through bluetoothd, as a value: D-Bus messages in, what
/// to do next out. ``BlueZPendingConnection`` (on an event loop) and
/// ``BlueZGATTBearer/connect(adapter:to:bus:timeout:log:)`` (blocking) do the sending; this
/// decides (pure, so the unhappy paths are tested without a bus).
///
/// 1. bluetoothd does not know the device: discover until it has its `Device1` (``found(connected:)``,
///    or the `InterfacesAdded` signal);
/// 2. `Device1.Connect`: bluetoothd has the kernel connect as soon as the device advertises; the
///    reply comes once the link is up, or with an error after the kernel's connect timeout;
/// 3. `ServicesResolved` (asked once, then followed in `PropertiesChanged`): done.
public struct BlueZConnectSteps: Sendable {
    public enum State: Sendable, Equatable {
        case discovering
        case connecting(serial: UInt32)
        case checking(serial: UInt32)
        case resolving
        case done
        case failed
    }

    /// What the driver does next.
    public enum Step: Sendable, Equatable {
        /// Nothing: wait for the next message.
        case wait
        /// Find the device: discover until bluetoothd has its `Device1`, then ``found(connected:)``
        /// (or hand the `InterfacesAdded` signal to ``receive(_:connectElapsed:)``).
        case discover
        /// Send `Device1.Connect` and report its serial with ``connectSent(serial:)``.
        case connect
        /// Send `Properties.Get(Device1, ServicesResolved)`, report with ``checkSent(serial:)``.
        case checkResolved
        /// The device is connected and its services resolved: build the bearer.
        case done
        /// The attempt failed. `notThere`: the device did not show up (connect timeout, not
        /// advertising), so trying again at once is right; otherwise back off.
        case fail(String, notThere: Bool)
    }

    public let devicePath: String
    public private(set) var state: State
    /// Whether we asked for the connection (so we disconnect when done with it).
    public private(set) var weConnected = false
    /// bluetoothd's error reply to `Connect`, when that ended the attempt.
    public private(set) var connectError: DBusMessage?

    /// Starts from what bluetoothd's object tree says about the device.
    public init(devicePath: String, known: Bool, connected: Bool) {
        self.devicePath = devicePath
        state = known ? (connected ? .resolving : .connecting(serial: 0)) : .discovering
    }

    /// The first step.
    public func first() -> Step {
        switch state {
        case .discovering: .discover
        case .connecting: .connect
        default: .checkResolved
        }
    }

    /// Discovery found the device (bluetoothd has its `Device1` now); `connected`: as it says.
    public mutating func found(connected: Bool) -> Step {
        guard state == .discovering else { return .wait }
        if connected { return check() }
        state = .connecting(serial: 0)
        return .connect
    }

    public mutating func connectSent(serial: UInt32) {
        state = .connecting(serial: serial)
        weConnected = true
    }

    public mutating func checkSent(serial: UInt32) { state = .checking(serial: serial) }

    /// One message from the bus; `elapsed` is how long the Connect call has been under way.
    public mutating func receive(_ m: DBusMessage, connectElapsed elapsed: Duration = .zero) -> Step {
        switch state {
        case .discovering:
            guard m.kind == .signal, m.interface == "org.freedesktop.DBus.ObjectManager", m.member == "InterfacesAdded",
                case .objectPath(let path)? = m.body?.first, path == devicePath,
                let interfaces = m.body?.dropFirst().first, interfaces["org.bluez.Device1"] != nil
            else { return .wait }
            state = .connecting(serial: 0)
            return .connect
        case .connecting(let serial):
            if m.replySerial == serial, serial != 0 {
                if m.kind == .error {
                    let name = m.errorName ?? "error"
                    var text = ""
                    if case .string(let s)? = m.body?.first { text = s }
                    if name == "org.bluez.Error.AlreadyConnected" { return check() }
                    state = .failed
                    connectError = m
                    return .fail(
                        "bluetoothd could not connect: \(name)\(text.isEmpty ? "" : ": " + text)",
                        notThere: Self.meansNotThere(name: name, text: text, elapsed: elapsed))
                }
                if m.kind == .methodReturn { return check() }
            }
            return .wait
        case .checking(let serial):
            if m.replySerial == serial {
                if m.kind == .methodReturn, m.body?.first?.unwrapped.boolValue == true { state = .done; return .done }
                state = .resolving  // false, or an error: follow the signals
                return .wait
            }
            return resolvingSignal(m)
        case .resolving:
            return resolvingSignal(m)
        case .done, .failed:
            return .wait
        }
    }

    private mutating func check() -> Step {
        state = .checking(serial: 0)
        return .checkResolved
    }

    private mutating func resolvingSignal(_ m: DBusMessage) -> Step {
        guard m.kind == .signal, m.path == devicePath, m.member == "PropertiesChanged", let body = m.body,
            body.count >= 2,
            body[0] == .string("org.bluez.Device1")
        else { return .wait }
        if body[1]["Connected"]?.boolValue == false {
            state = .failed
            return .fail("\(devicePath): disconnected before its services were resolved", notThere: false)
        }
        if body[1]["ServicesResolved"]?.boolValue == true {
            state = .done
            return .done
        }
        return .wait
    }

    /// Whether a failed Connect means the device was not in range or not advertising (wait
    /// again at once) rather than something to back off from. A Connect that lasted long ended
    /// at the kernel's connect timeout, whatever the words.
    public static func meansNotThere(name: String, text: String, elapsed: Duration) -> Bool {
        if elapsed >= .seconds(5) { return true }
        let t = text.lowercased()
        return ["abort-by-local", "timed out", "timeout", "host is down", "page-timeout", "not available", "no route"]
            .contains { t.contains($0) }
    }
}

/// `cuff watch` through bluetoothd: one cuff's connection under way, for an event loop. Its own
/// D-Bus connection carries the conversation (``BlueZConnectSteps``); the loop calls
/// ``advance()`` whenever that socket is readable, and gets a ``BlueZGATTBearer`` once the link is
/// up and the services resolved. bluetoothd has the kernel connect in the background as soon as
/// the cuff advertises, so many cuffs wait at once without a thread each.
public final class BlueZPendingConnection: PendingConnection {
    public let adapter: BluetoothAdapter
    public let peer: BluetoothAddress
    private var bus: BlueZBus?
    private var steps: BlueZConnectSteps
    private var connectSentAt: Timestamp?
    private var discovering = false
    /// bluetoothd's objects as ``start(adapter:to:busPath:log:)`` read them (for discovery).
    private var objects: [String: [String: DBusValue]] = [:]
    private let log: Logger

    public var fileDescriptor: CInt? { bus?.connection.fd }
    public var waitsForReadable: Bool { true }
    /// bluetoothd answers a Connect after the kernel's connect timeout (about 20 s); a
    /// conversation still open long after is started again.
    public var attemptTimeout: Duration? { .seconds(90) }

    /// Starts: a bus connection of its own, the signals it needs, then discovery or Connect.
    ///
    /// - Throws: no bus or no bluetoothd, bluetoothd without this adapter, a refused call.
    public static func start(
        adapter: BluetoothAdapter, to peer: BluetoothAddress, busPath: String = DBusConnection.systemBusPath(),
        log: Logger = .silent
    ) throws(TransportError) -> BlueZPendingConnection {
        let bus = try BlueZBus(busPath: busPath)
        do throws(TransportError) {
            let path = BlueZPaths.device(peer, on: adapter)
            try bus.addMatch("type='signal',sender='org.bluez',path_namespace='\(path)'")
            let objects = try bus.managedObjects()
            guard objects[BlueZPaths.adapter(adapter)]?["org.bluez.Adapter1"] != nil else {
                throw TransportError(
                    .notConnected, "bluetoothd has no adapter \(adapter) (\(BlueZPaths.adapter(adapter)))",
                    errno: ENODEV)
            }
            let device = objects[path]?["org.bluez.Device1"]
            let steps = BlueZConnectSteps(
                devicePath: path, known: device != nil, connected: device?["Connected"]?.boolValue == true)
            let p = BlueZPendingConnection(adapter: adapter, peer: peer, bus: bus, steps: steps, log: log)
            p.objects = objects
            try p.perform(p.steps.first())
            p.objects = [:]
            return p
        } catch {
            bus.close()
            throw error
        }
    }

    private init(
        adapter: BluetoothAdapter, peer: BluetoothAddress, bus: BlueZBus, steps: BlueZConnectSteps, log: Logger
    ) {
        self.adapter = adapter
        self.peer = peer
        self.bus = bus
        self.steps = steps
        self.log = log
    }

    deinit { cancel() }

    /// Sends what a step asks for; true when the device is ready.
    @discardableResult
    private func perform(_ step: BlueZConnectSteps.Step) throws(TransportError) -> Bool {
        guard let bus else { throw TransportError(.notConnected, "connect(\(peer)) through bluetoothd: cancelled") }
        switch step {
        case .wait: return false
        case .discover:
            log.info("bluetoothd does not know \(peer) yet; discovering (LE) on \(adapter)")
            try bus.addMatch(
                "type='signal',sender='org.bluez',interface='org.freedesktop.DBus.ObjectManager',member='InterfacesAdded'"
            )
            // Another program's discovery is followed, not joined (BlueZDiscoveryParticipation).
            let discovery = try BlueZDiscoveryParticipation(
                adapterPath: BlueZPaths.adapter(adapter), filter: [("Transport", .string("le"))],
                objects: objects, bus: bus, log: log)
            discovering = discovery.own
            // The device may have turned up between GetManagedObjects and the match.
            guard try bus.managedObjects()[steps.devicePath]?["org.bluez.Device1"] != nil else { return false }
            return try perform(steps.found(connected: false))
        case .connect:
            if discovering {
                // Discovery found it: our discovery session ends (other clients' go on).
                discovering = false
                _ = try? bus.connection.send(
                    .call(
                        destination: BlueZBus.service, path: BlueZPaths.adapter(adapter),
                        interface: "org.bluez.Adapter1", member: "StopDiscovery"))
            }
            let serial = try bus.connection.send(
                .call(
                    destination: BlueZBus.service, path: steps.devicePath,
                    interface: "org.bluez.Device1", member: "Connect"))
            steps.connectSent(serial: serial)
            connectSentAt = MonotonicClock.now()
            return false
        case .checkResolved:
            let serial = try bus.connection.send(
                .call(
                    destination: BlueZBus.service, path: steps.devicePath,
                    interface: "org.freedesktop.DBus.Properties", member: "Get",
                    body: [.string("org.bluez.Device1"), .string("ServicesResolved")]))
            steps.checkSent(serial: serial)
            return false
        case .done: return true
        case .fail(let why, let notThere):
            throw TransportError(
                notThere ? .timedOut : .notConnected, "\(peer) on \(adapter): \(why)", errno: notThere ? ETIMEDOUT : nil
            )
        }
    }

    /// Reads every message there is and takes the steps they lead to.
    public func advance() throws(TransportError) -> (any PollableBearer)? {
        guard let bus else { throw TransportError(.notConnected, "connect(\(peer)) through bluetoothd: cancelled") }
        while let m = try bus.next(until: .now) {
            let elapsed = connectSentAt.map { MonotonicClock.now() - $0 } ?? .zero
            if try perform(steps.receive(m, connectElapsed: elapsed)) {
                self.bus = nil
                return try BlueZGATTBearer.resolved(
                    adapter: adapter, peer: peer, bus: bus, weConnected: steps.weConnected, log: log)
            }
        }
        return nil
    }

    public func finish() throws(TransportError) -> any PollableBearer {
        guard let b = try advance() else {
            throw TransportError(.timedOut, "\(peer) on \(adapter): still connecting", errno: EINPROGRESS)
        }
        return b
    }

    /// Gives up: a Connect still under way is cancelled (`Device1.Disconnect`), the bus closed
    /// (bluetoothd then ends our discovery session itself).
    public func cancel() {
        guard let bus else { return }
        self.bus = nil
        if case .connecting(let serial) = steps.state, serial != 0 {
            _ = try? bus.connection.send(
                .call(
                    destination: BlueZBus.service, path: steps.devicePath,
                    interface: "org.bluez.Device1", member: "Disconnect"))
        }
        bus.close()
    }
}

extension BlueZDiscovery {
    /// The Blood Pressure Service's UUID as bluetoothd writes it in `Device1.UUIDs`.
    static let bloodPressureService = "00001810-0000-1000-8000-00805f9b34fb"

    /// The cuffs bluetoothd keeps paired on `adapter` (pure, from `GetManagedObjects`): its
    /// devices there that are `Paired` (or `Bonded`) and list the Blood Pressure Service among
    /// their `UUIDs`, so a desktop's headphones and mice are not followed. In address order.
    public static func bondedCuffs(in objects: [String: [String: DBusValue]], adapter: BluetoothAdapter)
        -> [BluetoothAddress]
    {
        let prefix = BlueZPaths.adapter(adapter) + "/dev_"
        var found: [BluetoothAddress] = []
        for (path, interfaces) in objects where path.hasPrefix(prefix) {
            guard let d = interfaces["org.bluez.Device1"],
                d["Paired"]?.boolValue == true || d["Bonded"]?.boolValue == true,
                (d["UUIDs"]?.stringsValue ?? []).contains(where: { $0.lowercased() == bloodPressureService }),
                let text = d["Address"]?.stringValue,
                let address = BluetoothAddress(
                    text, type: d["AddressType"]?.stringValue == "random" ? .random : .public)
            else { continue }
            found.append(address)
        }
        return found.sorted { $0.description < $1.description }
    }
}
