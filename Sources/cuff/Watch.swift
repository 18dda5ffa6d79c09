// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffOptions
import BloodPressure
import CuffCommands
import CuffRuntime

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Collect from many cuffs, always on: connect whenever a cuff is there, sync, store, repeat.",
        discussion: """
            Follows every cuff given with --connect (a socket, or a directory whose sockets are each a \
            cuff, including ones that appear later), each with its own session: Current Time set, stored \
            readings fetched (RACP "newer than" what was kept), live results followed until the cuff \
            switches off, then connected again. Records go to stdout as `cuff measure` prints them (each \
            with its device; no cuff-pressure progress unless --progress) and to --store; each reading is \
            committed before the cuff gets its confirmation, and a reading already kept is neither kept \
            nor printed again.

            stderr carries events and device identities, never readings (--verbose adds the sessions' own \
            lines, which may). SIGTERM or Ctrl-C: stop connecting, let open sessions end (5 s at most), \
            flush, exit 0. SIGHUP: reopen stdout and stderr if they were files (after logrotate moved them).

            With --adapter hciN, real cuffs: each --device ADDRESS, or by default every cuff bonded on the \
            adapter, connected as soon as it advertises. With bluetoothd running (--backend auto) through \
            bluetoothd (Device1.Connect; the cuffs it keeps paired with a Blood Pressure Service, also ones \
            paired later); without it (or --backend raw) on raw L2CAP, with cuff's bond store (--bonds).

            A store that cannot keep a reading (a full disk) is said once, with its error and never a \
            reading; such readings are not confirmed (the cuffs keep them and send them again) and watch \
            goes on collecting, each cuff retried with backoff, until the store takes them again.

            Exit status: 0 after SIGTERM/SIGINT, 9 the adapter cannot be used, 10 a sink failed at any \
            time during the run (stdout's reader going away too, with a store), 64 usage, 141 stdout's \
            reader went away (without a store).
            """
    )

    @Option(
        name: .customLong("connect"),
        help: ArgumentHelp(
            "A cuff to follow: unix:PATH of a `cuff simulate` socket, or unix:DIR for every socket in DIR (repeatable).",
            valueName: "unix:PATH"))
    var connect: [String] = []

    @Option(
        name: .customLong("device"),
        help: ArgumentHelp(
            "With --adapter: a cuff to follow, AA:BB:CC:DD:EE:FF[/random] (repeatable; default: every cuff bonded on the adapter, see --bonds). cuff connects as soon as it advertises.",
            valueName: "address"))
    var devices: [String] = []

    enum Help: BluetoothOptionsHelp {
        static let adapter: ArgumentHelp =
            "Bluetooth adapter to follow real cuffs on, e.g. hci0: every cuff bonded there, or those given with --device."
        static let security: ArgumentHelp? =
            "With --adapter: link security to ask for at once: low (default), medium or high. Raised anyway when a cuff asks."
        static let bonds: ArgumentHelp? =
            "With --adapter: the bond store (default $XDG_STATE_HOME/cuff/bonds); without --device, every cuff bonded there on the adapter is followed."
        static let setTime: ArgumentHelp? = "Do not write the cuffs' Current Time."
    }

    @OptionGroup var bluetooth: BluetoothOptions<Help>

    @Flag(help: "Also follow the cuff pressure while a cuff measures (progress records on stdout).")
    var progress = false

    @Flag(help: "Also log the sessions' own lines on stderr (these may name readings).")
    var verbose = false

    @Flag(
        name: .customLong("no-gatt-cache"),
        help: "Discover each cuff's handles on every connection: do not use or keep the GATT cache.")
    var noGATTCache = false

    @Option(help: "Apply this quirk profile to every cuff (default: chosen from each device's name and model).")
    var quirk: QuirkProfile?

    @OptionGroup var sinks: SinkOptions

    @OptionGroup var cuffProtocol: ProtocolOption

    @OptionGroup(title: "Omron cuffs") var omron: OmronSyncArguments

    func validate() throws {
        if let c = sinks.captureFormatName {
            throw ValidationError("--format \(c) names a capture format; cuff watch writes ndjson, fhir or omh")
        }
        guard !connect.isEmpty || bluetooth.adapter != nil else {
            throw ValidationError(
                "give --connect unix:PATH (a socket or a directory of sockets) or --adapter hciN (every bonded cuff, or --device ADDRESS)"
            )
        }
        if bluetooth.adapter == nil
            && (!devices.isEmpty || bluetooth.security != nil || bluetooth.bonds != nil || bluetooth.backend != .auto)
        {
            throw ValidationError("--device, --security, --bonds and --backend go with --adapter hciN")
        }
        for d in devices { _ = try BlueZCommands.address(d) }
        for c in connect where !c.hasPrefix("unix:") || c.count == 5 {
            throw ValidationError("--connect takes unix:PATH (a socket or a directory of sockets), not '\(c)'")
        }
    }

    func run() throws {
        let sinks = try self.sinks.setup()
        var service = WatchService(
            paths: connect.map { String($0.dropFirst("unix:".count)) }, openSinks: sinks.makeSinks)
        if let adapter = bluetooth.adapter {
            service.adapter = .init(
                adapter: try BlueZCommands.adapter(adapter), backend: bluetooth.backend, devices: devices,
                address: BlueZCommands.address,
                bonds: bluetooth.bonds)
        }
        service.followPressure = progress
        service.verbose = verbose
        service.quiet = sinks.quiet
        service.clockOffset = self.sinks.cuffClock
        service.gattCache = GATTCacheStore.unless(disabled: noGATTCache, bonds: bluetooth.bonds)
        let (setTime, level, forced, omron, quirk) = (
            !bluetooth.noSetTime, bluetooth.security ?? .low, cuffProtocol.forced, self.omron, self.quirk
        )
        service.configure = { c in
            c.setTime = setTime
            c.security = level
            c.forcedProtocol = forced
            c.quirk = quirk
            omron.configure(&c)
        }
        try service.run()
    }
}
