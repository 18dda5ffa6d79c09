// SPDX-License-Identifier: GPL-2.0-or-later
import BlueZ
import BluetoothLive
import CuffCore
import CuffLogging
import CuffRuntime
import CuffSession
import Logging
import MQTTSink
import Sinks
import Transport

/// `cuff watch`: every cuff followed on one event loop until SIGINT/SIGTERM, records to the
/// sinks (each reading committed before its cuff is confirmed); SIGHUP reopens stdout and stderr.
/// Ends with status 0, or throws ``ExitStatus/sinkFailed`` (a sink failed at any time),
/// ``ExitStatus/connectionFailed`` (the adapter or the loop cannot be used).
public struct WatchService {
    /// Real cuffs on an adapter: each of `devices`, or every cuff bonded there.
    public struct Adapter {
        public var adapter: BluetoothAdapter
        public var backend: Backend
        public var devices: [String]
        public var address: (String) throws -> BluetoothAddress
        public var bonds: String?

        public init(
            adapter: BluetoothAdapter, backend: Backend, devices: [String],
            address: @escaping (String) throws -> BluetoothAddress, bonds: String?
        ) {
            self.adapter = adapter
            self.backend = backend
            self.devices = devices
            self.address = address
            self.bonds = bonds
        }
    }

    /// Sockets, and directories of sockets, to follow (paths, without `unix:`).
    public var paths: [String]
    public var adapter: Adapter?
    /// Also follow the cuff pressure (progress records).
    public var followPressure = false
    /// Also log the sessions' own lines (these may name readings).
    public var verbose = false
    /// Nothing on stderr.
    public var quiet = false
    /// The offset each session sets its cuff's clock with (`--cuff-timezone`, else the host's).
    public var clockOffset: @Sendable () -> Int64 = { WallClock.localUTCOffsetSeconds() }
    /// What sessions learned about each cuff (nil: discover on every connection).
    public var gattCache: GATTCacheStore?
    /// The command's choices for each session (security, Current Time, protocol, Omron options).
    public var configure: (inout CuffSessionConfiguration) -> Void = { _ in }
    /// Opens the sinks: all of them, and the store among them.
    public var openSinks: () throws -> (FanOutSink, (any MeasurementStore)?)

    public init(paths: [String], openSinks: @escaping () throws -> (FanOutSink, (any MeasurementStore)?)) {
        self.paths = paths
        self.openSinks = openSinks
    }

    /// Each session's configuration for the cuff at `address`.
    public func sessionConfiguration(address: String, offset: Int64) -> CuffSessionConfiguration {
        var c = CuffSessionConfiguration(address: address)
        c.follow = true
        c.timeout = nil
        c.followCuffPressure = followPressure
        // Without the cuff pressure, a result is "stored" when it comes right after the
        // subscription (a cuff's upload), live when later: a short window, as a simulated fleet
        // at high --speed finishes a measurement within a second.
        if !followPressure { c.storedBurstWindow = .milliseconds(300) }
        c.localUTCOffsetSeconds = offset
        configure(&c)
        return c
    }

    public func run() throws {
        let signals = try SignalFlags.shared.listen(SignalFlags.Signal.standard + [.hup])
        // Events (.info) are what --quiet silences; the collector's store failures (.error) stay.
        let log = Console.logger("cuff watch", quiet: quiet)
        var watcherConfig = Watcher.Configuration()
        watcherConfig.add(paths: paths)
        watcherConfig.gattCache = gattCache
        // (Each session's own: a collector that runs across a change to or from summer time sets
        // the cuffs' clocks with the offset of the day.)
        watcherConfig.session = { [self] address in sessionConfiguration(address: address, offset: clockOffset()) }

        let (fan, store) = try Opening.sinks("cuff watch", openSinks)
        let outputs = fan.sinks.filter { !($0 is any MeasurementStore) }
        var known: Set<String> = []
        if let store {
            do { known = try store.knownKeys() } catch {
                Console.log("cuff watch: \(error)")
                throw ExitStatus.sinkFailed
            }
        }
        var outputFailed = false
        let collector = Collector(
            commit: store.map { s in { ms in try s.insert(contentsOf: ms) } },
            write: { o in
                do {
                    for s in outputs { try s.write(o) }
                } catch {
                    if let store, (error as? SinkError)?.isBrokenPipe == true {
                        // A store keeps the collector going: stderr stays its voice (probe Y: it went
                        // quiet for good, session ends, stop and summary included, and exit 141).
                        if !outputFailed {
                            Console.log(
                                "cuff watch: stdout's reader went away; readings go on to \(store.storeName) only (exit status 10 at the end)"
                            )
                        }
                    } else {
                        Console.noteFailure(error)
                        if !outputFailed { Console.log("cuff watch: \(error)") }
                    }
                    outputFailed = true
                    throw error
                }
            },
            knownKeys: known,
            log: log)
        let loop: EventLoop
        do { loop = try EventLoop() } catch {
            Console.log("cuff watch: \(error.message)")
            throw ExitStatus.connectionFailed
        }
        loop.afterEachTurn { collector.flush() }
        // --publish: the brokers' clients run on this loop, reconnecting with backoff.
        MQTTOutboxStore.attachAll(in: store, to: loop)
        // The sessions' own lines (`cuff watch: ADDRESS: …`) may name readings: --verbose only.
        let sessionLog = verbose && !quiet ? Console.logger("cuff watch") : .silent
        // RACP "newer than": per cuff, the highest sequence number the store holds.
        if let store { watcherConfig.storedSequenceNumber = { try? store.lastSequenceNumber(address: $0) } }
        let watcher = Watcher(
            configuration: watcherConfig, loop: loop, collector: collector, log: log, sessionLog: sessionLog)
        var agent: LiveBluetooth.Agent?
        if let a = adapter {
            do {
                agent = try LiveBluetooth.watch(
                    adapter: a.adapter, backend: a.backend, devices: a.devices, address: a.address, bonds: a.bonds,
                    watcher: watcher, log: Console.logger("cuff watch"))
            } catch let f as LiveBluetoothFailure {
                throw f.outcome.exitStatus
            }
        }
        defer { agent?.stop() }
        let stdoutFile = ReopenableOutput(fd: 1), stderrFile = ReopenableOutput(fd: 2)
        log.info(
            "watching \(watcherConfig.sockets.count) socket(s) and \(watcherConfig.directories.count) director\(watcherConfig.directories.count == 1 ? "y" : "ies")\(store.map { "; storing in \($0.storeName)" } ?? "")"
        )
        watcher.start()
        do {
            try loop.run {
                if !watcher.stopping {
                    if signals.isRaised(.int) || signals.isRaised(.term) {
                        log.info(
                            "stopping (\(signals.isRaised(.term) ? "SIGTERM" : "SIGINT")): \(watcher.openSessions) open session(s)"
                        )
                        watcher.stop()
                    } else if outputFailed && store == nil {
                        watcher.stop()
                    }
                }
                if signals.consume(.hup) {
                    for o in [stdoutFile, stderrFile] {
                        if let e = o.reopen() { Console.log("cuff watch: \(e)") }
                    }
                    log.info("SIGHUP: output reopened")
                }
                return watcher.isDone
            }
        } catch {
            Console.log("cuff watch: \(error.message)")
        }
        collector.flush()
        // A sink that failed at any time during the run (a full disk that later freed up too) is status 10.
        var failed = outputFailed || collector.sinkFailed
        do { try fan.finish() } catch {
            // (stdout's reader gone, with a store: said already, and stderr stays on for the summary.)
            if store == nil || !error.isBrokenPipe {
                _ = Console.sinkFailed("cuff watch", error)
            }
            failed = true
        }
        let p50 = collector.latency.quantile(0.5).map { "\($0) ms" } ?? "-"
        let p99 = collector.latency.quantile(0.99).map { "\($0) ms" } ?? "-"
        let notKept = collector.failures > 0 ? ", \(collector.failures) not kept (left unconfirmed on their cuffs)" : ""
        log.info(
            "stopped: \(collector.stored) reading(s) kept, \(collector.duplicates) repeat(s) skipped\(notKept); commit latency p50 \(p50), p99 \(p99)"
        )
        if failed { throw Console.sinkFailureStatus }
    }
}
