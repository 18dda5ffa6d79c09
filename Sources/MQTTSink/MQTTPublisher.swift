// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import Sinks
import StoreFormat
import Transport

/// What one `--publish` target needs.
public struct MQTTPublishOptions: Sendable {
    public var url: MQTTURL
    /// TLS files for `mqtts://` (`--publish-ca`, `--publish-cert`, `--publish-key`).
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?
    /// The local SQLite outbox of this target.
    public var outboxPath: String
    /// When ``outboxPath`` is the default one: its tagged name
    /// (``MQTTOutboxStore/defaultOutboxPath(for:tagged:environment:)``), used when another prefix
    /// claimed the plain one (their names are the same: `a/b`, `a_b`). Nil for an `--outbox`: then
    /// the outbox passes to this prefix if it is empty and open in no other process.
    public var taggedOutboxPath: String?
    /// Where an earlier cuff kept this prefix's readings by default (``MQTTOutboxStore/legacyOutboxPaths(for:environment:)``):
    /// what waits there for this prefix is named at open, with the command that publishes it.
    public var legacyOutboxPaths: [String] = []
    /// Home Assistant discovery, or nil (`--no-ha-discovery`).
    public var discovery: HomeAssistantDiscovery?
    /// The offset given to the cuffs' zone-less clock times (`--cuff-timezone`, else the host's zone).
    public var utcOffset: UTCOffsetPolicy
    /// The MQTT client id (default `cuff-HOSTNAME-PID`).
    public var clientID: String
    /// Readings published and not yet acknowledged, at most.
    public var window: Int = 200
    /// How long a connection attempt may take.
    public var connectTimeout: Duration = .seconds(10)
    /// How long ``MQTTOutboxStore/finish()`` waits for the outbox to empty.
    public var finishTimeout: Duration = .seconds(15)

    public init(
        url: MQTTURL, outboxPath: String, caFile: String? = nil, certFile: String? = nil, keyFile: String? = nil,
        discovery: HomeAssistantDiscovery? = HomeAssistantDiscovery(), utcOffset: UTCOffsetPolicy = .system,
        clientID: String
    ) {
        self.url = url
        self.outboxPath = outboxPath
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
        self.discovery = discovery
        self.utcOffset = utcOffset
        self.clientID = clientID
    }
}

/// Publishes what an outbox holds to one broker, oldest first, over a libmosquitto client driven by
/// an ``EventLoop`` (the caller's, with ``attach(to:)``, or one of its own for a bounded
/// ``run(until:deadline:)``). A row leaves the outbox only once the broker acknowledged (PUBACK)
/// its `reading` message and, when sent, its `state` message; a broken connection forgets what was
/// in flight, and the next one publishes those rows again (the `dedup_key` tells a consumer it is a
/// repeat). Connection attempts back off from 0.5 s to 30 s.
///
/// Not thread-safe: one thread at a time (the loop's).
final class MQTTPublisher {
    let options: MQTTPublishOptions
    let outbox: SQLiteStore
    let topics: MQTTTopics
    let warn: SinkWarningHandler
    /// Called with the dedup keys of rows the broker acknowledged (and that left the outbox).
    var onDelivered: ([String]) -> Void = { _ in }

    private var client: MosquittoClient?
    private(set) var connected = false
    private var connectStarted = Timestamp.zero
    /// The last failure (nil after a successful connection).
    private(set) var lastError: MQTTError?
    /// The failure last said through `warn` (said once until the connection is back).
    private var saidError: MQTTError?
    private var retryAt = Timestamp.zero
    private var backoff: Duration = .milliseconds(500)
    /// Whether to connect (again) by itself when there is no connection.
    var reconnects = true
    /// Whether a long-running loop (a watch) drives it: failures are followed by new attempts.
    var longRunning = false
    /// Failures since ``resetFailureCount()``.
    private(set) var failures = 0

    private var loop: EventLoop?
    private var watchedFD: CInt?
    private var timer: EventLoop.TimerID?

    /// Message id → outbox row, for the rows in flight.
    private var rowOfMessage: [Int32: Int64] = [:]
    /// Row → acknowledgements still awaited, and its dedup key.
    private var awaiting: [Int64: (count: Int, key: String)] = [:]
    /// The outbox's last read error, said once.
    private var saidOutboxError: SinkError?
    /// Why the outbox could not be read on the last try (nil: it could).
    var outboxError: SinkError? { saidOutboxError }
    /// Rows of the outbox that cannot be read or decoded: left there, said once each.
    private(set) var unreadable = UnreadableOutboxRows()

    private func leaveUnreadable(_ id: Int64, _ reason: String, dedupKey: String? = nil) {
        guard unreadable.note(id, reason) else { return }
        warn(SinkWarning(sink: "publish", message: "outbox \(outbox.path): \(reason); left there", dedupKey: dedupKey))
    }
    /// Rows acknowledged, to leave the outbox in one commit.
    private var acknowledged: [(id: Int64, key: String)] = []
    /// Whether the outbox had no row beyond those in flight when last read.
    private var exhausted = false
    /// Discovery sent on this connection, by node id.
    private var announced: Set<String> = []
    /// The time of the reading each state topic holds, to keep the latest there: from this run,
    /// and from the retained states the broker holds (read after each connect, before any state
    /// is published: probe Y, a `cuff sync` of an older outbox, or a second hub, replaced a newer
    /// retained state with an older reading).
    private var stateTime: [String: Int64] = [:]
    /// The retained states are being read: a subscription to every state topic, then a marker
    /// message on a topic of this client's own, which the broker delivers after every retained
    /// state it sent for the subscription before. Rows wait until then, or ``stateCheckDeadline``.
    private var learningStates = false
    private var stateCheckDeadline = Timestamp.zero
    private var markerSubscription: Int32?
    private var stateSubscription: Int32?
    private var stateFilter: String { "\(topics.prefix)/+/+/state" }
    private var markerTopic: String { "\(topics.prefix)/cuff-state-check/\(Outbox.slug(options.clientID))" }
    /// How long a broker gets to send its retained states before rows go out regardless.
    static let stateCheckTimeout: Duration = .seconds(2)
    /// Message ids of the `offline` status, when it was sent.
    private var offlineMessage: Int32?
    private(set) var offlineAcknowledged = false
    private(set) var delivered = 0

    init(options: MQTTPublishOptions, outbox: SQLiteStore, warn: @escaping SinkWarningHandler) {
        self.options = options
        self.outbox = outbox
        self.topics = MQTTTopics(prefix: options.url.prefix)
        self.warn = warn
    }

    deinit { closeClient() }

    /// Nothing waits: the outbox was read to its end and every row is acknowledged and removed.
    var drained: Bool { connected && exhausted && awaiting.isEmpty && acknowledged.isEmpty }

    // MARK: Loop

    /// Drives the client from `loop` (a timer for keep-alive and reconnection, the socket's readiness).
    func attach(to loop: EventLoop) {
        detach()
        self.loop = loop
        scheduleTick()
        updateInterest()
        service()
    }

    /// Stops using the loop (the connection stays).
    func detach() {
        if let loop {
            if let watchedFD { loop.unwatch(watchedFD) }
            if let timer { loop.cancel(timer) }
        }
        watchedFD = nil
        timer = nil
        loop = nil
    }

    /// Runs a loop of its own until `done()` or `deadline`, then gives back the loop it had.
    func run(until done: () -> Bool, deadline: Timestamp) {
        let previous = loop
        guard let own = try? EventLoop() else { return }
        attach(to: own)
        while !done() && MonotonicClock.now() < deadline {
            do { try own.runOnce(timeout: deadline - MonotonicClock.now()) } catch { break }
        }
        detach()
        if let previous { attach(to: previous) }
    }

    private func scheduleTick() {
        guard let loop else { return }
        timer = loop.schedule(at: MonotonicClock.now() + .milliseconds(250)) { [weak self] in
            guard let self else { return }
            self.timer = nil
            self.service()
            self.scheduleTick()
        }
    }

    /// Counts failures from zero again, and makes the next attempt due now (not after the backoff).
    func resetFailureCount() {
        failures = 0
        retryAt = .zero
    }

    /// New rows may wait: publish them now when connected.
    func kick() {
        exhausted = false
        guard loop != nil else { return }
        fill()
        updateInterest()
    }

    /// The periodic step: connect when due, keep-alive, time-outs, more rows.
    func service() {
        let now = MonotonicClock.now()
        guard let client else {
            if reconnects && now >= retryAt { startConnect() }
            return
        }
        if !connected && now - connectStarted > options.connectTimeout {
            fail(
                MQTTError(
                    .timeout, broker: options.url.serverName, detail: "no CONNACK within \(options.connectTimeout)"))
            return
        }
        do throws(MQTTError) { try client.misc() } catch {
            fail(error)
            return
        }
        fill()
        updateInterest()
    }

    private func ready(_ r: EventLoop.Readiness) {
        guard let client else { return }
        do throws(MQTTError) {
            if r.contains(.readable) || r.contains(.hangUp) { try client.read() }
            if self.client != nil, r.contains(.writable) { try client.write() }
            handleEvents()
        } catch {
            handleEvents()
            fail(error)
            return
        }
        fill()
        commitAcknowledged()
        updateInterest()
    }

    private func updateInterest() {
        guard let loop else { return }
        let fd = client?.socket
        if fd != watchedFD {
            if let watchedFD { loop.unwatch(watchedFD) }
            watchedFD = nil
            if let fd {
                do {
                    try loop.watch(fd, readable: true, writable: client?.wantsWrite ?? false) { [weak self] r in
                        self?.ready(r)
                    }
                    watchedFD = fd
                } catch {
                    fail(MQTTError(.client, broker: options.url.serverName, detail: "\(error)"))
                }
            }
        } else if let fd {
            loop.change(fd, readable: true, writable: client?.wantsWrite ?? false)
        }
    }

    // MARK: Connection

    func startConnect() {
        closeClient()
        let u = options.url
        do throws(MQTTError) {
            let tls =
                u.tls
                ? MosquittoClient.TLS(caFile: options.caFile, certFile: options.certFile, keyFile: options.keyFile)
                : nil
            let c = try MosquittoClient(id: options.clientID, url: u, tls: tls, will: (topics.status, "offline"))
            client = c
            connectStarted = MonotonicClock.now()
            try c.connect(host: u.host, port: u.port, keepalive: 30)
            updateInterest()
        } catch {
            fail(error)
        }
    }

    private func handleEvents() {
        guard let client else { return }
        let events = client.events
        client.events.removeAll()
        for e in events {
            switch e {
            case .connected:
                connected = true
                backoff = .milliseconds(500)
                if saidError != nil {
                    warn(
                        SinkWarning(
                            sink: "publish",
                            message: "connected to \(options.url.serverName) again; publishing what waits in the outbox"
                        ))
                }
                saidError = nil
                lastError = nil
                exhausted = false
                announced.removeAll()
                _ = try? client.publish(topic: topics.status, payload: Array("online".utf8), retain: true)
                learningStates = true
                stateCheckDeadline = MonotonicClock.now() + Self.stateCheckTimeout
                do throws(MQTTError) {
                    stateSubscription = try client.subscribe(stateFilter)
                    markerSubscription = try client.subscribe(markerTopic)
                } catch {
                    finishStateCheck(client)
                }
            case let .subscribed(mid, granted):
                guard learningStates else { continue }
                if !granted {
                    finishStateCheck(client)  // (a broker's ACL may refuse: go on as before)
                } else if mid == markerSubscription {
                    if (try? client.publish(topic: markerTopic, payload: Array("1".utf8), retain: false)) == nil {
                        finishStateCheck(client)
                    }
                }
            case let .message(topic, payload):
                if topic == markerTopic {
                    if learningStates { finishStateCheck(client) }
                } else if topic.hasSuffix("/state"), let t = Self.stateOrderTime(payload), t > stateTime[topic] ?? .min
                {
                    stateTime[topic] = t
                }
            case .refused:
                break  // the read that brought it fails with the reason
            case .published(let mid):
                if mid == offlineMessage { offlineAcknowledged = true }
                guard let row = rowOfMessage.removeValue(forKey: mid), var a = awaiting[row] else { continue }
                a.count -= 1
                if a.count == 0 {
                    awaiting[row] = nil
                    acknowledged.append((row, a.key))
                } else {
                    awaiting[row] = a
                }
            case .disconnected:
                break  // a read or write says why
            }
        }
    }

    /// Drops the connection after `error`; rows in flight stay in the outbox for the next one.
    private func fail(_ error: MQTTError) {
        commitAcknowledged()
        closeClient()
        failures += 1
        lastError = error
        retryAt = MonotonicClock.now() + backoff
        backoff = min(backoff * 2, .seconds(30))
        // A refusal when a command starts is its error, said by it (nothing waits yet).
        if saidError != error && (longRunning || reconnects || !error.isPermanent) {
            saidError = error
            warn(
                SinkWarning(
                    sink: "publish",
                    message:
                        "\(Self.sentence(error)); readings wait in the outbox \(outbox.path)\(longRunning ? "; trying again" : "")"
                ))
        }
    }

    /// `error`'s text without a full stop at its end (libmosquitto's messages have one), so that
    /// more can follow after a semicolon.
    static func sentence(_ error: MQTTError) -> String {
        let s = "\(error)"
        return s.hasSuffix(".") ? String(s.dropLast()) : s
    }

    private func closeClient() {
        if let loop, let watchedFD { loop.unwatch(watchedFD) }
        watchedFD = nil
        client = nil
        connected = false
        rowOfMessage.removeAll()
        awaiting.removeAll()
        exhausted = false
    }

    /// Publishes `offline` (retained) and waits for its acknowledgement (a `cuff watch` stopping).
    func sendOffline() {
        guard connected, let client else { return }
        offlineAcknowledged = false
        offlineMessage = try? client.publish(topic: topics.status, payload: Array("offline".utf8), retain: true)
        updateInterest()
    }

    /// Says goodbye (DISCONNECT: the will is not sent) and closes.
    func disconnect() {
        if connected, let client {
            client.disconnect()
            var n = 0
            while client.wantsWrite && n < 100 {
                do throws(MQTTError) { try client.write() } catch { break }
                n += 1
            }
        }
        closeClient()
    }

    // MARK: Publishing

    /// Queues the oldest rows not in flight until the window is full or the outbox has no more.
    /// (Not "rows after the last one queued": SQLite gives a removed row's id to the next one.)
    /// The retained states are known (or the broker had ``stateCheckTimeout`` to send them).
    private func finishStateCheck(_ client: MosquittoClient) {
        learningStates = false
        client.unsubscribe(stateFilter)
        client.unsubscribe(markerTopic)
        stateSubscription = nil
        markerSubscription = nil
    }

    private func fill() {
        guard connected, let client, !exhausted else { return }
        if learningStates {
            guard MonotonicClock.now() >= stateCheckDeadline else { return }
            finishStateCheck(client)
        }
        let free = options.window - awaiting.count
        guard free > 0 else { return }
        var skip = unreadable.ids
        skip.formUnion(awaiting.keys)
        for a in acknowledged { skip.insert(a.id) }
        let rows: [StoredMeasurement]
        let read: StoreReading
        do { read = try outbox.pendingReadable(limit: free + skip.count) } catch {
            // Said once: this runs on every turn until the outbox can be read again.
            if saidOutboxError != error {
                saidOutboxError = error
                warn(SinkWarning(sink: "publish", message: "\(error)"))
            }
            return
        }
        saidOutboxError = nil
        if read.rows.count + read.skipped.count < free + skip.count { exhausted = true }
        // A row that cannot be read stays in the outbox, said once; the others go on.
        for p in read.skipped where !skip.contains(p.rowID) { leaveUnreadable(p.rowID, p.description) }
        rows = read.rows
        for row in rows.lazy.filter({ !skip.contains($0.id) }).prefix(free) {
            do throws(MQTTError) { try publish(row, client) } catch {
                fail(error)
                return
            }
        }
    }

    private func publish(_ row: StoredMeasurement, _ client: MosquittoClient) throws(MQTTError) {
        let m: MeasurementRecord
        do { m = try row.record() } catch {
            leaveUnreadable(row.id, "row \(row.id) does not decode (\(error.message))", dedupKey: row.dedupKey)
            return
        }
        if let discovery = options.discovery {
            let node = HomeAssistantDiscovery.nodeID(m.device, user: m.userID)
            if !announced.contains(node) {
                for c in discovery.configs(device: m.device, user: m.userID, topics: topics) {
                    _ = try client.publish(topic: c.topic, payload: Array(c.payload.serialized().utf8), retain: true)
                }
                announced.insert(node)
            }
        }
        var count = 1
        let mid = try client.publish(
            topic: topics.reading(m.device, user: m.userID), payload: Array(MQTTPayload.reading(m).serialized().utf8),
            retain: false)
        rowOfMessage[mid] = row.id
        // The state topic keeps the latest reading: a stored one fetched later does not replace it.
        let stateTopic = topics.state(m.device, user: m.userID)
        let at = Self.sortTime(m, options.utcOffset)
        if at >= stateTime[stateTopic] ?? .min {
            stateTime[stateTopic] = at
            let sm = try client.publish(
                topic: stateTopic, payload: Array(MQTTPayload.state(m, offset: options.utcOffset).serialized().utf8),
                retain: true)
            rowOfMessage[sm] = row.id
            count += 1
        }
        awaiting[row.id] = (count, row.dedupKey)
    }

    /// The order time of a retained state (``sortTime(_:_:)`` of the reading it holds): its
    /// `measured_at`, or its `received_at` when that is earlier (a cuff clock that ran ahead).
    static func stateOrderTime(_ payload: [UInt8]) -> Int64? {
        guard let measured = measuredAt(payload) else { return nil }
        return min(measured, time(#""received_at":""#, in: payload) ?? measured)
    }

    /// Seconds since 1970 of a retained state's `measured_at` (RFC 3339, with `Z` or an offset).
    static func measuredAt(_ payload: [UInt8]) -> Int64? { time(#""measured_at":""#, in: payload) }

    /// Seconds since 1970 of the RFC 3339 time after `keyText` (`"KEY":"`) in `payload`.
    static func time(_ keyText: StaticString, in payload: [UInt8]) -> Int64? {
        let key = keyText.withUTF8Buffer { Array($0) }
        guard payload.count > key.count,
            let at = (0...(payload.count - key.count)).first(where: { payload[$0..<$0 + key.count].elementsEqual(key) })
        else { return nil }
        let start = at + key.count
        guard let end = payload[start...].firstIndex(of: UInt8(ascii: "\"")) else { return nil }
        let u = Array(payload[start..<end])
        guard u.count >= 20, u[4] == 45, u[7] == 45, u[10] == 84, u[13] == 58, u[16] == 58 else { return nil }
        func n(_ r: Range<Int>) -> Int64? {
            var v: Int64 = 0
            for i in r { guard u[i] >= 48 && u[i] <= 57 else { return nil }; v = v * 10 + Int64(u[i] - 48) }
            return v
        }
        guard let y = n(0..<4), let mo = n(5..<7), let d = n(8..<10), let h = n(11..<13), let mi = n(14..<16),
            let s = n(17..<19), (1...12).contains(mo), (1...31).contains(d)
        else { return nil }
        var i = 19
        if u[i] == 46 {  // a fraction of a second
            i += 1
            while i < u.count, u[i] >= 48 && u[i] <= 57 { i += 1 }
        }
        guard i < u.count else { return nil }
        var zone: Int64 = 0
        if u[i] == 90 {
            guard i + 1 == u.count else { return nil }
        } else if u[i] == 43 || u[i] == 45, i + 6 == u.count, u[i + 3] == 58, let zh = n(i + 1..<i + 3),
            let zm = n(i + 4..<i + 6)
        {
            zone = (zh * 3600 + zm * 60) * (u[i] == 45 ? -1 : 1)
        } else {
            return nil
        }
        return CivilCalendar.days(fromCivil: y, mo, d) * 86400 + h * 3600 + mi * 60 + s - zone
    }

    /// Seconds since 1970 of the reading's measurement time (its device time with the offset, else
    /// its arrival), never after its arrival: a reading is taken before it arrives, so a later
    /// time is a cuff clock that ran ahead (probe D3: one such reading, 2 h ahead, kept the
    /// retained state for two hours against every newer reading).
    static func sortTime(_ m: MeasurementRecord, _ offset: UTCOffsetPolicy) -> Int64 {
        min(deviceTime(m, offset), m.receivedAt.wallMicros / 1_000_000)
    }

    static func deviceTime(_ m: MeasurementRecord, _ offset: UTCOffsetPolicy) -> Int64 {
        if let ts = m.timestamp, ts.utf8.count >= 19 {
            let u = Array(ts.utf8)
            func n(_ r: Range<Int>) -> Int64? {
                var v: Int64 = 0
                for i in r { guard u[i] >= 48 && u[i] <= 57 else { return nil }; v = v * 10 + Int64(u[i] - 48) }
                return v
            }
            if let y = n(0..<4), let mo = n(5..<7), let d = n(8..<10), let h = n(11..<13), let mi = n(14..<16),
                let s = n(17..<19)
            {
                let zone = ts.hasSuffix("Z") ? 0 : Int64(offset.offsetSeconds(m))
                return CivilCalendar.days(fromCivil: y, mo, d) * 86400 + h * 3600 + mi * 60 + s - zone
            }
        }
        return m.receivedAt.wallMicros / 1_000_000
    }

    /// Removes acknowledged rows from the outbox (their keys kept as delivered), in one commit.
    private func commitAcknowledged() {
        guard !acknowledged.isEmpty else { return }
        let batch = acknowledged
        do {
            try outbox.remove(ids: batch.map(\.id), rememberingKeys: true)
            acknowledged.removeAll()
            delivered += batch.count
            onDelivered(batch.map(\.key))
        } catch {
            // Still in the outbox: published again later, which the dedup key makes harmless.
            acknowledged.removeAll()
            warn(SinkWarning(sink: "publish", message: "\(error)"))
        }
    }
}
