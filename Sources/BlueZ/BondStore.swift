// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Glibc
import Transport

/// One key the kernel handed out when a pairing finished (MGMT New Long Term Key / New IRK /
/// New CSRK), kept as the kernel's own record so it can be loaded back unchanged.
public struct BondKey: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        /// `struct mgmt_ltk_info`: address(6) type(1) key type(1) central(1) enc size(1) ediv(2) rand(8) value(16).
        case ltk
        /// `struct mgmt_irk_info`: address(6) type(1) value(16).
        case irk
        /// `struct mgmt_csrk_info`: address(6) type(1) key type(1) value(16).
        case csrk
    }

    public var kind: Kind
    /// The local controller's address (indexes change across reboots; addresses don't).
    public var adapterAddress: BluetoothAddress
    /// The record as the kernel sent it.
    public var record: [UInt8]

    public static func recordLength(_ kind: Kind) -> Int {
        switch kind {
        case .ltk: 36
        case .irk: 23
        case .csrk: 24
        }
    }

    public init?(kind: Kind, adapterAddress: BluetoothAddress, record: [UInt8]) {
        guard record.count == Self.recordLength(kind) else { return nil }
        self.kind = kind
        self.adapterAddress = adapterAddress
        self.record = record
    }

    /// The peer's identity address (the record's first 7 bytes).
    public var peer: MGMTAddress {
        var r = ByteReader(record)
        return MGMTAddress(&r)!
    }

    /// The key from an MGMT event packet (0x000A, 0x0018, 0x0019); nil for anything else.
    public static func from(event packet: MGMTPacket, adapterAddress: BluetoothAddress) -> BondKey? {
        let p = packet.parameters
        switch packet.code {
        case 0x000A where p.count == 1 + 36:
            return BondKey(kind: .ltk, adapterAddress: adapterAddress, record: Array(p[1...]))
        case 0x0018 where p.count == 1 + 6 + 23:
            return BondKey(kind: .irk, adapterAddress: adapterAddress, record: Array(p[7...]))
        case 0x0019 where p.count == 1 + 24:
            return BondKey(kind: .csrk, adapterAddress: adapterAddress, record: Array(p[1...]))
        default: return nil
        }
    }

    /// One line of the store: `ltk 00:AA:01:01:00:01 <hex>`.
    var line: String { "\(kind.rawValue) \(adapterAddress) \(Hex.encode(record))" }

    init?(line: Substring) {
        let parts = line.split(separator: " ")
        guard parts.count == 3, let kind = Kind(rawValue: String(parts[0])), let adapter = BluetoothAddress(parts[1]),
            let record = Hex.decode(String(parts[2]))
        else { return nil }
        self.init(kind: kind, adapterAddress: adapter, record: record)
    }
}

/// Bonds made on the raw path (no bluetoothd to keep them), in a file only the user can read:
/// `--bonds PATH`, else `$XDG_STATE_HOME/cuff/bonds`, else `~/.local/state/cuff/bonds`. The
/// kernel forgets its keys at every reboot (and they are not ours to read back), so cuff loads
/// them again (MGMT Load Long Term Keys / Load IRKs) before connecting.
public struct BondStore: Sendable {
    public let path: String
    public private(set) var keys: [BondKey]
    /// At most this many keys are kept (the oldest go first).
    public static let maxKeys = 1024

    /// The default path: `bonds` in cuff's state directory (``StateDirectory/cuff(environment:)``).
    public static func defaultPath(environment: (String) -> String? = { getenv($0).map { String(cString: $0) } })
        -> String
    {
        StateDirectory.cuff(environment: environment) + "/bonds"
    }

    /// Reads the store (an absent file is an empty store). Malformed lines are skipped.
    public init(path: String) throws(TransportError) {
        self.path = path
        switch Sys.readFile(path, limit: 1 << 20, regularFileOnly: true) {
        case .success(let bytes):
            keys = String(decoding: bytes, as: UTF8.self).split(separator: "\n").compactMap { BondKey(line: $0) }
        case .failure(.noSuchFileOrDirectory):
            keys = []
        case .failure(.invalidArgument):
            throw TransportError.system(
                "open", "bond store \(path)", .invalidArgument,
                hint: "not a regular file (a FIFO, a device or a socket)")
        case .failure(let e):
            throw TransportError.system("open", "bond store \(path)", e)
        }
    }

    /// Adds keys, replacing older ones of the same kind for the same adapter and peer.
    public mutating func add(_ new: [BondKey]) {
        for k in new {
            keys.removeAll {
                $0.kind == k.kind && $0.adapterAddress == k.adapterAddress && $0.peer == k.peer
                    && ($0.kind != .ltk || $0.record[8] == k.record[8])
            }  // an LTK per role (central flag)
            keys.append(k)
        }
        if keys.count > Self.maxKeys { keys.removeFirst(keys.count - Self.maxKeys) }
    }

    /// Removes every key for `peer` on the adapter with `adapterAddress`; returns how many.
    @discardableResult
    public mutating func remove(peer: BluetoothAddress, adapterAddress: BluetoothAddress) -> Int {
        let before = keys.count
        keys.removeAll { $0.adapterAddress == adapterAddress && $0.peer.address.rawValue == peer.rawValue }
        return before - keys.count
    }

    /// The keys for one adapter.
    public func keys(adapterAddress: BluetoothAddress, kind: BondKey.Kind) -> [BondKey] {
        keys.filter { $0.adapterAddress == adapterAddress && $0.kind == kind }
    }

    /// Writes the store: directories made 0700, the file written to a temporary name with mode
    /// 0600, synced, then renamed over the old one.
    public func save() throws(TransportError) {
        try PrivateFile.replace(path, with: keys.map { $0.line + "\n" }.joined(), what: "bond store")
    }
}

extension MGMTCommand {
    /// Load Long Term Keys (0x0013): **replaces** the controller's LTKs with `keys`.
    public static func loadLongTermKeys(index: UInt16, _ keys: [BondKey]) -> MGMTPacket {
        let ltks = keys.filter { $0.kind == .ltk }
        var w = ByteWriter()
        w.write(UInt16(ltks.count))
        for k in ltks { w.write(contentsOf: k.record) }
        return MGMTPacket(code: 0x0013, index: index, parameters: w.bytes)
    }

    /// Load Identity Resolving Keys (0x0030): replaces the controller's IRKs.
    public static func loadIRKs(index: UInt16, _ keys: [BondKey]) -> MGMTPacket {
        let irks = keys.filter { $0.kind == .irk }
        var w = ByteWriter()
        w.write(UInt16(irks.count))
        for k in irks { w.write(contentsOf: k.record) }
        return MGMTPacket(code: 0x0030, index: index, parameters: w.bytes)
    }

    /// Unpair Device (0x001B), disconnecting it.
    public static func unpairDevice(index: UInt16, _ address: MGMTAddress) -> MGMTPacket {
        MGMTPacket(code: 0x001B, index: index, parameters: address.encoded + [1])
    }
}

/// The raw path's bond handling around one command: load the stored keys into the kernel before
/// connecting, store the new ones the pairing agent saw afterwards.
public enum RawBonds {
    /// Loads `store`'s LTKs and IRKs for `adapter` (replacing the kernel's: without bluetoothd the
    /// kernel holds only keys of pairings made since boot, which cuff stored as they were made).
    /// Returns how many keys were loaded; nothing is sent when the store has none for it.
    public static func load(_ store: BondStore, adapter: BluetoothAdapter, address: BluetoothAddress)
        throws(TransportError) -> Int
    {
        let ltks = store.keys(adapterAddress: address, kind: .ltk)
        let irks = store.keys(adapterAddress: address, kind: .irk)
        guard !ltks.isEmpty || !irks.isEmpty else { return 0 }
        let mgmt = try MGMTSocket()
        defer { mgmt.close() }
        if !ltks.isEmpty { try mgmt.execute(MGMTCommand.loadLongTermKeys(index: adapter.index, ltks)) }
        if !irks.isEmpty { try mgmt.execute(MGMTCommand.loadIRKs(index: adapter.index, irks)) }
        return ltks.count + irks.count
    }

    /// Unpairs `peer` in the kernel (MGMT Unpair Device); "not paired" is not an error.
    public static func unpair(_ peer: BluetoothAddress, adapter: BluetoothAdapter) throws(TransportError) {
        let mgmt = try MGMTSocket()
        defer { mgmt.close() }
        do {
            try mgmt.execute(
                MGMTCommand.unpairDevice(index: adapter.index, MGMTAddress(peer, typeCode: peer.type.rawValue)))
        } catch  where error.mgmtStatus == MGMTCommand.notPairedStatus {
            // MGMT_STATUS_NOT_PAIRED: nothing to remove
        }
    }
}
