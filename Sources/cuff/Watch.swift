// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import BloodPressure
import CuffCore
import CuffRuntime
import CuffSession
import MQTTSink
import Sinks
import Transport

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
            time during the run.
            """
    )

    @Option(name: .customLong("connect"), help: ArgumentHelp(
        "A cuff to follow: unix:PATH of a `cuff simulate` socket, or unix:DIR for every socket in DIR (repeatable).",
        valueName: "unix:PATH"))
    var connect: [String] = []

    @Option(help: "Bluetooth adapter to follow real cuffs on, e.g. hci0: every cuff bonded there, or those given with --device.")
    var adapter: String?

    @Option(name: .customLong("device"), help: ArgumentHelp(
        "With --adapter: a cuff to follow, AA:BB:CC:DD:EE:FF[/random] (repeatable; default: every cuff bonded on the adapter, see --bonds). cuff connects as soon as it advertises.",
        valueName: "address"))
    var devices: [String] = []

    @Option(help: Backend.help)
    var backend: Backend = .auto

    @Option(help: "With --adapter: link security to ask for at once: low (default), medium or high. Raised anyway when a cuff asks.")
    var security: SecurityLevel?

    @Option(help: "With --adapter: the bond store (default $XDG_STATE_HOME/cuff/bonds); without --device, every cuff bonded there on the adapter is followed.")
    var bonds: String?

    @Flag(help: "Also follow the cuff pressure while a cuff measures (progress records on stdout).")
    var progress = false

    @Flag(help: "Also log the sessions' own lines on stderr (these may name readings).")
    var verbose = false

    @Flag(name: .customLong("no-set-time"), help: "Do not write the cuffs' Current Time.")
    var noSetTime = false

    @Option(help: "Apply this quirk profile to every cuff (default: chosen from each device's name and model).")
    var quirk: QuirkProfile?

    @OptionGroup var sinks: SinkOptions

    @OptionGroup var cuffProtocol: ProtocolOption

    @OptionGroup(title: "Omron cuffs") var omron: OmronSyncArguments

    func validate() throws {
        if let c = sinks.captureFormatName {
            throw ValidationError("--format \(c) names a capture format; cuff watch writes ndjson, fhir or omh")
        }
        guard !connect.isEmpty || adapter != nil else {
            throw ValidationError("give --connect unix:PATH (a socket or a directory of sockets) or --adapter hciN --device ADDRESS")
        }
        if adapter == nil && (!devices.isEmpty || security != nil || bonds != nil || backend != .auto) {
            throw ValidationError("--device, --security, --bonds and --backend go with --adapter hciN")
        }
        for d in devices { _ = try BlueZCommands.address(d) }
        for c in connect where !c.hasPrefix("unix:") || c.count == 5 {
            throw ValidationError("--connect takes unix:PATH (a socket or a directory of sockets), not '\(c)'")
        }
    }

    func run() throws {
        let signals = SignalFlags.shared
        try signals.install(SignalFlags.Signal.standard + [.hup])
        try signals.unblockOnCurrentThread(SignalFlags.Signal.standard + [.hup])
        let log: (String) -> Void = sinks.quiet ? { _ in } : { Output.log("cuff watch: " + $0) }

        var watcherConfig = Watcher.Configuration()
        watcherConfig.add(paths: connect.map { String($0.dropFirst("unix:".count)) })
        let followPressure = progress, setTime = !noSetTime, level = security ?? .low
        let offset = WallClock.localUTCOffsetSeconds()
        let forced = cuffProtocol.forced, quirk = self.quirk
        let omron = self.omron
        watcherConfig.session = { address in
            var c = CuffSessionConfiguration(address: address)
            c.follow = true
            c.timeout = nil
            c.followCuffPressure = followPressure
            // Without the cuff pressure, a result is "stored" when it comes right after the
            // subscription (a cuff's upload), live when later: a short window, as a simulated fleet
            // at high --speed finishes a measurement within a second.
            if !followPressure { c.storedBurstWindow = .milliseconds(300) }
            c.setTime = setTime
            c.security = level
            c.localUTCOffsetSeconds = offset
            c.forcedProtocol = forced
            c.quirk = quirk
            omron.configure(&c)
            return c
        }

        let fan: FanOutSink
        let store: (any MeasurementStore)?
        do {
            (fan, store) = try sinks.makeSinks()
        } catch {
            Output.log("cuff watch: \(error)")
            throw ExitCode(Output.sinkFailedStatus)
        }
        let outputs = fan.sinks.filter { !($0 is any MeasurementStore) }
        var known: Set<String> = []
        if let store {
            do { known = try store.knownKeys() } catch {
                Output.log("cuff watch: \(error)")
                throw ExitCode(Output.sinkFailedStatus)
            }
        }
        var outputFailed = false
        let collector = Collector(
            commit: store.map { s in { ms in try s.insert(contentsOf: ms) } },
            write: { o in
                do {
                    for s in outputs { try s.write(o) }
                } catch {
                    Output.noteFailure(error)
                    if !outputFailed { Output.log("cuff watch: \(error)") }
                    outputFailed = true
                    throw error
                }
            },
            knownKeys: known,
            report: { Output.log("cuff watch: " + $0) })
        let loop: EventLoop
        do { loop = try EventLoop() } catch {
            Output.log("cuff watch: \(error.message)")
            throw ExitCode(SessionExit.connectionFailed)
        }
        loop.afterEachTurn { collector.flush() }
        // --publish: the brokers' clients run on this loop, reconnecting with backoff.
        MQTTOutboxStore.attachAll(in: store, to: loop)
        let sessionLog: ((String, String) -> Void)? = verbose && !sinks.quiet ? { a, s in Output.log("cuff watch: \(a): \(s)") } : nil
        // RACP "newer than": per cuff, the highest sequence number the store holds.
        if let store { watcherConfig.storedSequenceNumber = { try? store.lastSequenceNumber(address: $0) } }
        let watcher = Watcher(configuration: watcherConfig, loop: loop, collector: collector, log: log, sessionLog: sessionLog)
        var agent: BlueZCommands.Agent?
        if let adapter {
            agent = try BlueZCommands.watch(adapter: adapter, backend: backend, devices: devices, bonds: bonds, watcher: watcher)
        }
        defer { agent?.stop() }
        let stdoutFile = ReopenableOutput(fd: 1), stderrFile = ReopenableOutput(fd: 2)
        log("watching \(watcherConfig.sockets.count) socket(s) and \(watcherConfig.directories.count) director\(watcherConfig.directories.count == 1 ? "y" : "ies")\(store.map { "; storing in \($0.storeName)" } ?? "")")
        watcher.start()
        do {
            try loop.run {
                if !watcher.stopping {
                    if signals.isRaised(.int) || signals.isRaised(.term) {
                        log("stopping (\(signals.isRaised(.term) ? "SIGTERM" : "SIGINT")): \(watcher.openSessions) open session(s)")
                        watcher.stop()
                    } else if outputFailed && store == nil {
                        watcher.stop()
                    }
                }
                if signals.consume(.hup) {
                    for o in [stdoutFile, stderrFile] {
                        if let e = o.reopen() { Output.log("cuff watch: \(e)") }
                    }
                    log("SIGHUP: output reopened")
                }
                return watcher.isDone
            }
        } catch {
            Output.log("cuff watch: \(error.message)")
        }
        collector.flush()
        // A sink that failed at any time during the run (a full disk that later freed up too) is status 10.
        var failed = outputFailed || collector.sinkFailed
        do { try fan.finish() } catch { _ = Output.sinkFailed("cuff watch", error); failed = true }
        let p50 = collector.latency.quantile(0.5).map { "\($0) ms" } ?? "-"
        let p99 = collector.latency.quantile(0.99).map { "\($0) ms" } ?? "-"
        let notKept = collector.failures > 0 ? ", \(collector.failures) not kept (left unconfirmed on their cuffs)" : ""
        log("stopped: \(collector.stored) reading(s) kept, \(collector.duplicates) repeat(s) skipped\(notKept); commit latency p50 \(p50), p99 \(p99)")
        if failed { throw ExitCode(Output.sinkFailureStatus) }
    }
}
