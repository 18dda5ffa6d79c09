// SPDX-License-Identifier: GPL-2.0-or-later
import BlueZ
import CuffCore
import CuffLogging
import CuffSession
import Logging
import Omron
import Transport

extension LiveBluetooth {
    /// `cuff pair ADDRESS`: bonds with `peer` and returns the security level reached. `backend`
    /// is resolved already. Without bluetoothd: the ATT connect, the link security raised, the
    /// kernel's pairing questions answered (MGMT) for this device only, the keys kept in the bond
    /// store. With bluetoothd: `Device1.Pair` with an agent for this device only; bluetoothd keeps
    /// the bond.
    ///
    /// With `omron` (`cuff pair ADDR --model NAME`), the model's Omron pairing variant follows
    /// the OS bond over the same link (``omronPair(over:configuration:signals:loop:log:)``); a refused
    /// key, a cuff not in pairing mode and a latched refusal end with their own outcome.
    public static func pair(
        _ peer: BluetoothAddress, adapter: BluetoothAdapter, backend: Backend, level: SecurityLevel, bonds: String?,
        omron: CuffSessionConfiguration? = nil, log: Logger
    ) throws(LiveBluetoothFailure) -> SecurityLevel {
        func omronStep(_ r: (outcome: SessionOutcome, message: String?)) throws(LiveBluetoothFailure) {
            guard r.outcome == .completed else {
                // (The session's log said its reason already, when it had one.)
                if r.message == nil { log.info("\(r.outcome.rawValue)") }
                throw LiveBluetoothFailure(r.outcome)
            }
        }
        if backend == .bluetoothd {
            let reached = try pairThroughBluetoothd(peer, adapter: adapter, level: level, log: log)
            if let omron {
                try omronStep(
                    try omronPairThroughBluetoothd(peer: peer, adapter: adapter, configuration: omron, log: log))
            }
            return reached
        }
        // The pairing agent answers on this loop: while the link's security is raised, during the
        // Omron pairing, and while the keys are waited for.
        let loop: EventLoop
        do { loop = try EventLoop() } catch {
            log.info("\(error.message)")
            throw LiveBluetoothFailure(.securityRefused)
        }
        let agent = pairingAgent(adapter, peer: peer, loop: loop, log: log)
        let store = bondStore(bonds, log: log)
        loadBonds(store, adapter: adapter, log: log)
        defer {
            saveBonds(store, agent: agent, adapter: adapter, log: log)
            agent?.stop()
        }
        let bearer: L2CAPATTBearer
        do {
            bearer = try connect(adapter: adapter, to: peer, log: log)
            try bearer.raiseSecurity(to: level, on: loop)
        } catch {
            log.info("\(error.message)")
            throw LiveBluetoothFailure(.securityRefused)
        }
        defer { bearer.close() }
        if let omron { try omronStep(omronPair(over: bearer, configuration: omron, loop: loop, log: log)) }
        return bearer.securityLevel
    }

    /// With bluetoothd: `Device1.Pair` (bluetoothd discovers and connects) with an agent that
    /// answers for this device only and is not the default agent; bluetoothd keeps the bond (and
    /// reloads it after a reboot).
    static func pairThroughBluetoothd(
        _ peer: BluetoothAddress, adapter: BluetoothAdapter, level: SecurityLevel, log: Logger
    ) throws(LiveBluetoothFailure) -> SecurityLevel {
        do {
            let bus = try BlueZBus()
            defer { bus.close() }
            let path = BlueZPaths.device(peer, on: adapter)
            log.info("pairing through bluetoothd (org.bluez.Device1.Pair on \(path))")
            let already = try BlueZPairing.pair(peer, on: adapter, bus: bus, log: log)
            if already { log.info("\(peer) is bonded already (bluetoothd: Paired = true)") }
            // bluetoothd keeps the bond and, on its own link, encrypts with it: that is the level.
            return level
        } catch {
            log.info("\(error.message)")
            throw LiveBluetoothFailure(.securityRefused)
        }
    }

    /// `cuff pair --forget`: the bond goes from the kernel (MGMT Unpair Device) and the store, or
    /// from bluetoothd (Adapter1.RemoveDevice, which unpairs in the kernel and deletes its files).
    /// Returns how many stored keys were removed.
    public static func forget(
        _ peer: BluetoothAddress, adapter: BluetoothAdapter, backend: Backend, bonds: String?, log: Logger
    ) throws(LiveBluetoothFailure) -> Int {
        var removed = 0
        do {
            if backend == .bluetoothd {
                let bus = try BlueZBus()
                defer { bus.close() }
                do {
                    try bus.call(
                        BlueZPaths.adapter(adapter), "org.bluez.Adapter1", "RemoveDevice",
                        [.objectPath(BlueZPaths.device(peer, on: adapter))])
                } catch  where error.dbusError == .doesNotExist || error.dbusError == .unknownObject {
                    log.info("bluetoothd does not know \(peer)")
                }
            } else {
                try RawBonds.unpair(peer, adapter: adapter)
            }
            if var store = bondStore(bonds, log: log) {
                removed = store.remove(peer: peer, adapterAddress: try adapter.info().address)
                if removed > 0 { try store.save() }
            }
        } catch {
            log.info("\(error.message)")
            throw LiveBluetoothFailure(.connectionFailed)
        }
        return removed
    }

    /// `cuff pair`'s record: `paired` (with the security reached) or `forgotten` (with the keys removed).
    /// The `paired` record; with an Omron model, also `protocol`, `model` and `pairing`.
    public static func pairRecord(_ peer: BluetoothAddress, security: SecurityLevel, omronModel: String? = nil) -> JSON
    {
        let p = omronModel.flatMap(OmronCatalog.profile(named:))
        return .object(
            [
                ("type", .string("paired")), ("address", .string(peer.description)),
                ("address_type", .string(peer.type.description)), ("security", .string(security.description)),
            ]
                + (p.map {
                    [
                        ("protocol", .string("omron")), ("model", .string($0.id)),
                        ("pairing", .string($0.pairing.rawValue)),
                    ]
                } ?? []))
    }

    public static func forgetRecord(_ peer: BluetoothAddress, removed: Int) -> JSON {
        .object([
            ("type", .string("forgotten")), ("address", .string(peer.description)),
            ("address_type", .string(peer.type.description)),
            ("stored_keys_removed", .int(Int64(removed))),
        ])
    }
}

extension LiveBluetooth {
    /// A text that names something other than a Bluetooth device.
    public struct NotABluetoothAddress: Error, Sendable, CustomStringConvertible {
        public var text: String
        public var description: String {
            "'\(text)' is not a Bluetooth address (AA:BB:CC:DD:EE:FF, optionally /random)"
        }
    }

    /// A device's address as given on the command line: `AA:BB:CC:DD:EE:FF`, optionally `/random`.
    public static func address(_ text: String) throws -> BluetoothAddress {
        guard case let .bluetooth(a) = try TransportAddress(parsing: text) else {
            throw NotABluetoothAddress(text: text)
        }
        return a
    }
}
