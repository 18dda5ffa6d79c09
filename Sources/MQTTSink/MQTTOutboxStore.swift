// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import CuffSession
import Foundation
import Sinks
import StoreFormat
import Synchronization
import Transport

/// `--publish mqtt://…`: a reading is committed to the local SQLite outbox before ``insert(_:)``
/// returns, so before the session confirms it to the cuff; the ``MQTTPublisher`` then publishes it
/// (QoS 1) and removes it from the outbox only once the broker acknowledged it. A broker that is
/// down, slow or restarting costs nothing: readings wait and go out oldest first when it is back.
///
/// `cuff watch` drives the publisher from its own event loop (``attach(to:)``); the one-shot commands
/// publish when they finish (``finish()``), and `cuff sync --publish` with ``publishAll(timeout:)``.
/// A broker that refuses this cuff (password, TLS) fails at open, before any reading is taken.
///
/// The outbox remembers the dedup keys of delivered readings (the broker cannot be asked), so a
/// cuff sending its memory again is not published twice.
public final class MQTTOutboxStore: MeasurementStore, @unchecked Sendable {
    public let options: MQTTPublishOptions
    public let outbox: SQLiteStore
    let publisher: MQTTPublisher
    let warn: SinkWarningHandler
    /// Delivered (acknowledged) dedup keys.
    private let sent: DeliveredKeys
    private let done = Atomic<Bool>(false)
    /// Whether a loop drives it (then `finish` publishes `offline` first: a watch is stopping).
    private var attached = false

    public var storeName: String { options.url.description }
    public var outboxPath: String { outbox.path }
    /// This process's hold on the outbox (``OutboxLock``), dropped when it closes.
    let lock: OutboxLock
    /// Readings an earlier cuff left for this prefix in another outbox (``MQTTPublishOptions/legacyOutboxPaths``):
    /// said through `warn` at open, kept for `cuff sync` to print.
    public let notices: [String]

    /// Opens the outbox (creating it, mode 0600) and, with `check`, connects once to see that the
    /// broker takes this cuff: a refusal (user, password, TLS) throws; an unreachable broker is said
    /// through `warn` and readings wait in the outbox.
    public init(
        options: MQTTPublishOptions, check: Bool = true, warn: @escaping SinkWarningHandler = SinkWarnings.standardError
    ) throws(SinkError) {
        self.options = options
        self.warn = warn
        let destination = Outbox.mqttDestination(prefix: options.url.prefix)
        let url = options.url
        let opened = try Outbox.open(
            [options.outboxPath] + (options.taggedOutboxPath.map { [$0] } ?? []),
            for: destination, takingEmpty: options.taggedOutboxPath == nil, utcOffset: options.utcOffset, warn: warn,
            service: "this --publish",
            mqttURL: { prefix in
                var theirs = url
                theirs.prefix = prefix
                return theirs.description
            })
        outbox = opened.store
        lock = opened.lock
        do { sent = DeliveredKeys(try outbox.sentKeys()) } catch {
            try? outbox.finish()
            throw error
        }
        publisher = MQTTPublisher(options: options, outbox: outbox, warn: warn)
        let sentKeys = sent
        publisher.onDelivered = { keys in sentKeys.keys.withLock { s in for k in keys { s.insert(k) } } }
        if !options.url.tls && !options.url.isLoopback {
            warn(
                SinkWarning(
                    sink: "publish",
                    message:
                        "\(options.url) is not TLS and not this machine: readings (health data) cross the network in the clear; use mqtts://"
                ))
        }
        var notices: [String] = []
        for legacy in options.legacyOutboxPaths where legacy != outbox.path {
            guard let n = SQLiteStore.outboxWaiting(path: legacy, for: destination) else { continue }
            notices.append(
                "\(n) reading\(n == 1 ? "" : "s") wait\(n == 1 ? "s" : "") in \(legacy), an outbox an earlier cuff kept for \(options.url.serverName); "
                    + "cuff sync --publish \(options.url) --outbox \(legacy) publishes them under this prefix")
        }
        self.notices = notices
        for n in notices { warn(SinkWarning(sink: "publish", message: n)) }
        guard check else { return }
        publisher.reconnects = false
        publisher.startConnect()
        publisher.run(
            until: { publisher.connected || publisher.failures > 0 },
            deadline: MonotonicClock.now() + options.connectTimeout)
        if let e = publisher.lastError, e.isPermanent {
            try? outbox.finish()
            throw .publishRefused(url: options.url.description, reason: e.description)
        }
        publisher.disconnect()
        publisher.resetFailureCount()
    }

    /// Publishes from `loop` from now on, reconnecting with backoff, until ``finish()``.
    public func attach(to loop: EventLoop) {
        attached = true
        publisher.longRunning = true
        publisher.reconnects = true
        publisher.attach(to: loop)
    }

    /// Attaches every publishing store in `store` (itself, or inside a ``StoreGroup``) to `loop`.
    public static func attachAll(in store: (any MeasurementStore)?, to loop: EventLoop) {
        if let s = store as? MQTTOutboxStore { s.attach(to: loop) }
        if let g = store as? StoreGroup { for s in g.stores { attachAll(in: s, to: loop) } }
    }

    // MARK: MeasurementStore

    public func knownKeys() throws(SinkError) -> Set<String> {
        try outbox.knownKeys().union(sent.keys.withLock { $0 })
    }

    public func lastSequenceNumber(address: String) throws(SinkError) -> UInt16? {
        [try outbox.lastSequenceNumber(address: address), try outbox.lastSentSequenceNumber(address: address)]
            .compactMap { $0 }.max()
    }

    @discardableResult
    public func insert(_ m: MeasurementRecord) throws(SinkError) -> StoreInsertOutcome {
        if done.load(ordering: .relaxed) { throw .finished(sink: "publish") }
        if sent.keys.withLock({ $0.contains(m.dedupKey) }) { return .duplicate }
        let outcome = try outbox.insert(m)
        if outcome.isNew && attached { publisher.kick() }
        return outcome
    }

    @discardableResult
    public func insert(contentsOf ms: [MeasurementRecord]) throws(SinkError) -> Int {
        if done.load(ordering: .relaxed) { throw .finished(sink: "publish") }
        let known = sent.keys.withLock { $0 }
        let n = try outbox.insert(contentsOf: known.isEmpty ? ms : ms.filter { !known.contains($0.dedupKey) })
        if n > 0 && attached { publisher.kick() }
        return n
    }

    /// What waits in the outbox (the broker keeps no history).
    public func history() throws(SinkError) -> [StoredMeasurement] { try outbox.history() }

    public func write(_ o: SessionOutput) throws(SinkError) {
        guard case let .measurement(m) = o else {
            if done.load(ordering: .relaxed) { throw .finished(sink: "publish") }
            return
        }
        try insert(m)
    }

    /// What ``publishAll(timeout:)`` did.
    public struct PublishResult: Sendable {
        /// Readings the broker acknowledged (and that left the outbox).
        public var delivered: Int
        /// Readings still in the outbox (nil: the outbox could not be counted, see ``countError``).
        public var waiting: Int?
        /// Why it stopped with readings waiting.
        public var failure: MQTTError?
        /// Why the outbox could not be counted afterwards.
        public var countError: SinkError?

        /// What waits, for a message: "1 reading", "3 readings", or "readings (an unknown number:
        /// WHY)" when the outbox could not be counted.
        public var waitingText: String {
            guard let waiting else {
                return
                    "readings (an unknown number: \(countError.map { "\($0)" } ?? "the outbox could not be counted"))"
            }
            return "\(waiting) reading\(waiting == 1 ? "" : "s")"
        }
    }

    /// Publishes until the outbox is empty, the first failure, or `timeout`.
    public func publishAll(timeout: Duration) -> PublishResult {
        let before = publisher.delivered
        publisher.reconnects = true
        publisher.resetFailureCount()
        publisher.kick()
        // An outbox that cannot be read ends it at once: waiting could not help.
        publisher.run(
            until: { publisher.drained || publisher.failures > 0 || publisher.outboxError != nil },
            deadline: MonotonicClock.now() + timeout)
        // A count that fails (a damaged outbox) is said as such, never as a number.
        let counted = Result { () throws(SinkError) in try outbox.count() }
        let waiting = try? counted.get()
        var failure = publisher.lastError
        if waiting != 0 && failure == nil, let e = publisher.outboxError {
            failure = MQTTError(.outbox, broker: options.url.serverName, detail: "\(e)")
        }
        if let w = waiting, w != 0, failure == nil, publisher.drained, publisher.unreadable.count >= w {
            // What is left is what cannot be read (each said above), not what the broker did not take.
            let u = publisher.unreadable
            failure = MQTTError(
                .outbox, broker: options.url.serverName,
                detail:
                    "\(u.rows.noun) of the outbox \(outbox.path) cannot be read, and \(u.rows.stay) there \(u.reasonList)"
            )
        }
        if waiting != 0 && failure == nil {
            failure = MQTTError(
                .timeout, broker: options.url.serverName, detail: "not every reading was acknowledged within \(timeout)"
            )
        }
        var result = PublishResult(
            delivered: publisher.delivered - before, waiting: waiting, failure: waiting == 0 ? nil : failure)
        if case .failure(let e) = counted { result.countError = e }
        return result
    }

    /// Publishes what waits (for at most the options' `finishTimeout`; a stopping watch, at most
    /// ``stoppingTimeout``), says how many still wait, marks the status `offline` when a watch is
    /// stopping, disconnects and closes the outbox.
    public func finish() throws(SinkError) {
        guard !done.exchange(true, ordering: .relaxed) else { throw .finished(sink: "publish") }
        publisher.detach()
        publisher.longRunning = false
        // A watch told to stop exits within seconds (its README promise): a broker that does not
        // acknowledge cannot hold it; what is left waits in the outbox for the next run or sync.
        let r = publishAll(timeout: attached ? min(options.finishTimeout, Self.stoppingTimeout) : options.finishTimeout)
        if attached && publisher.connected {
            publisher.sendOffline()
            publisher.run(
                until: { publisher.offlineAcknowledged || !publisher.connected },
                deadline: MonotonicClock.now() + .seconds(1))
        }
        publisher.disconnect()
        defer { lock.release() }
        if r.waiting != 0 {
            let why = r.failure.map { ": \($0)" } ?? ""
            warn(
                SinkWarning(
                    sink: "publish",
                    message:
                        "\(r.waitingText) wait\(r.waiting == 1 ? "s" : "") in the outbox \(outbox.path)\(why); "
                        + "cuff sync --publish URL --outbox \(outbox.path) publishes them"))
        }
        try outbox.finish()
    }

    /// How long a stopping `cuff watch` publishes what waits (then 1 s for the `offline` status).
    public static let stoppingTimeout: Duration = .seconds(2)

    /// Closes without publishing (after ``publishAll(timeout:)``).
    public func close() throws(SinkError) {
        guard !done.exchange(true, ordering: .relaxed) else { throw .finished(sink: "publish") }
        publisher.detach()
        publisher.disconnect()
        defer { lock.release() }
        try outbox.finish()
    }

    /// The default outbox of a broker and topic prefix: `$XDG_STATE_HOME/cuff/mqtt-HOST-PORT.db`
    /// (by default under `~/.local/state`) for the default prefix `cuff`, `mqtt-HOST-PORT-PREFIX.db`
    /// for another (``Outbox/fileNames(_:)``; `tagged`: the name with a ``Outbox/tag(_:)``, for
    /// when the plain one is another prefix's). Two processes that publish to one broker under
    /// other prefixes must not share one: each would publish the other's readings under its own prefix.
    public static func defaultOutboxPath(
        for url: MQTTURL, tagged: Bool = false, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String {
        let names = Outbox.fileNames(url.prefix)
        let name =
            tagged ? "-" + names.tagged : url.prefix == MQTTURL.defaultPrefix ? "" : "-" + names.plain
        return Outbox.stateDirectory(environment: environment)
            + "/mqtt-\(MQTTTopics.slug(url.host))-\(url.port)\(name).db"
    }

    /// Where an earlier cuff kept this prefix's readings by default: the broker's one outbox for
    /// every prefix (`mqtt-HOST-PORT.db`), or for `cuff` beside another prefix, `mqtt-HOST-PORT-cuff.db`.
    public static func legacyOutboxPaths(
        for url: MQTTURL, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> [String] {
        let base = Outbox.stateDirectory(environment: environment) + "/mqtt-\(MQTTTopics.slug(url.host))-\(url.port)"
        return [url.prefix == MQTTURL.defaultPrefix ? base + "-cuff.db" : base + ".db"]
    }

    /// The default client id: `cuff-HOSTNAME-PID`.
    public static func defaultClientID() -> String {
        "cuff-\(MQTTTopics.slug(ProcessInfo.processInfo.hostName))-\(ProcessInfo.processInfo.processIdentifier)"
    }
}

/// The delivered dedup keys, shared with the publisher's callback.
final class DeliveredKeys: Sendable {
    let keys: Mutex<Set<String>>
    init(_ keys: Set<String>) { self.keys = Mutex(keys) }
}
