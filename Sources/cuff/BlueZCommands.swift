// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import BlueZ
import BluetoothLive
import CuffCommands
import CuffCore
import CuffOptions
import CuffSession
import Transport

struct Scan: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Scan for Bluetooth LE blood-pressure cuffs (service 0x1810, or an Omron cuff's own protocol).",
        discussion:
            "Prints one JSON object per device seen, merged from its advertisements and scan responses. Needs root (CAP_NET_RAW/CAP_NET_ADMIN)."
    )

    enum Help: BluetoothOptionsHelp {
        static let adapter: ArgumentHelp = "Bluetooth adapter. (default: hci0)"
        static let bonds: ArgumentHelp? = nil, security: ArgumentHelp? = nil, setTime: ArgumentHelp? = nil
    }

    @OptionGroup var bluetooth: BluetoothOptions<Help>

    @Option(help: "Seconds to scan.")
    var timeout: Double = 5

    @Flag(help: "Include devices that are not blood-pressure cuffs.")
    var all = false

    func validate() throws { try SecondsOption.check(timeout, option: "--timeout") }

    func run() throws {
        let adapter = try bluetooth.parsedAdapter()
        let signals = try SignalFlags.shared.listen()
        let log = Console.logger("cuff scan")
        let collector = ScanCollector(all: all) { r in
            if let record = r.deviceRecord { try Console.print([record.serialized()], command: "cuff scan") }
        }
        try LiveBluetooth.scan(
            adapter: adapter, backend: bluetooth.backend, duration: SecondsOption.duration(timeout), all: all,
            stop: { signals.isRaised(.int) || signals.isRaised(.term) }, collector: collector, log: log)
        try collector.finish(log: log)
    }
}

struct Pair: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract: "Pair (bond) with a cuff, answering the confirmation BlueZ asks for.",
        discussion: """
            Without bluetoothd: connects to the ATT channel, raises the link security and answers the kernel's \
            pairing questions (MGMT) for this device only, and keeps the keys in the bond store (--bonds). With \
            bluetoothd running (a desktop, --backend auto): asks bluetoothd to pair (org.bluez.Device1.Pair; it \
            discovers and connects), with a NoInputNoOutput org.bluez.Agent1 registered for this call that answers \
            for this device on this adapter only and rejects and logs anything else; bluetoothd keeps the bond.
            """
    )

    enum Help: BluetoothOptionsHelp {
        static let adapter: ArgumentHelp = "Bluetooth adapter. (default: hci0)"
        static let bonds: ArgumentHelp? = BlueZCommands.bondsHelp
        static let security: ArgumentHelp? = "medium (default: encrypted, Just Works) or high (authenticated)."
        static let setTime: ArgumentHelp? = nil
    }

    @Argument(help: "Bluetooth address of the cuff (append /random for a random address).")
    var address: String?

    @Option(
        help:
            "Omron: pair with a simulated cuff at unix:PATH (`cuff simulate --model NAME --unpaired`; SIGUSR1 is its button)."
    )
    var connect: String?

    @OptionGroup(title: "Omron cuffs") var omron: OmronSyncArguments

    @OptionGroup var bluetooth: BluetoothOptions<Help>

    @Flag(
        help: "Remove the bond with ADDRESS instead: from the kernel and the bond store (raw path), or from bluetoothd."
    )
    var forget = false

    func validate() throws {
        guard (bluetooth.security ?? .medium) > .low else {
            throw ValidationError("--security takes medium or high: pairing is what raises the link above low")
        }
        guard (address == nil) != (connect == nil) else { throw ValidationError("give ADDRESS or --connect unix:PATH") }
        if let address { _ = try BlueZCommands.address(address) }
        if let connect {
            guard connect.hasPrefix("unix:") else { throw ValidationError("--connect takes unix:PATH") }
            guard omron.model != nil else { throw ValidationError("--connect pairs an Omron cuff: give --model NAME") }
        }
    }

    func run() throws {
        if let connect {
            // Omron over a Unix socket: the model's pairing variant, through the same session as a sync.
            var c = CuffSessionConfiguration(address: connect)
            c.localUTCOffsetSeconds = WallClock.localUTCOffsetSeconds()
            c.setTime = false
            omron.configure(&c)
            c.omronSync.pair = true
            return try OmronPairing.run(c, connect: connect)
        }
        let level = bluetooth.security ?? .medium
        let adapter = try bluetooth.parsedAdapter()
        let peer = try BlueZCommands.address(address!)
        let log = Console.logger("cuff pair")
        let backend = bluetooth.backend.resolved(log: log)
        // --model: the model's Omron pairing variant after the OS bond.
        let omronStep = omron.model.map { _ in
            var c = CuffSessionConfiguration(address: peer.description)
            c.localUTCOffsetSeconds = WallClock.localUTCOffsetSeconds()
            omron.configure(&c)
            return c
        }
        let record =
            forget
            ? LiveBluetooth.forgetRecord(
                peer,
                removed: try LiveBluetooth.forget(
                    peer, adapter: adapter, backend: backend, bonds: bluetooth.bonds, log: log))
            : LiveBluetooth.pairRecord(
                peer,
                security: try LiveBluetooth.pair(
                    peer, adapter: adapter, backend: backend, level: level, bonds: bluetooth.bonds,
                    omron: omronStep, log: log), omronModel: omron.model)
        try Console.print([record.serialized()], command: "cuff pair")
    }
}
