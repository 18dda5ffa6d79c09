// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore

/// Which records a sync reads, and whether it marks them read (issue #24 item 2).
public struct OmronSyncOptions: Sendable, Hashable {
    /// Read every slot of every user instead of the unread ones.
    public var allRecords = false
    /// Leave the unread counters as they were (the vendor app still gets the records).
    public var keepUnread = false
    /// Write the host's time to the cuff (once per session, carrying the current time).
    public var setTime = true
    /// Program the key (custom-key profiles) or bond in pairing mode, then only start and end.
    public var pair = false
    /// The 16-byte key of custom-key profiles.
    public var key: [UInt8] = OmronSimulator.defaultKey
    /// The 4 host bytes of the token unlock (not a secret; the runtime passes random ones).
    public var token: [UInt8] = [0x13, 0x57, 0x9B, 0xDF]
    /// How long a reply may take, and how often a frame is sent (hass-omron: 5 s × 4).
    public var replyTimeout: Duration = .seconds(5)
    public var attempts = 4
    /// Pairing-mode probes (`02`+zeros) and the wait for each (hass-omron: 5 × 2 s).
    public var pairingProbes = 5
    public var pairingProbeWait: Duration = .seconds(2)
    /// Wait after the clock write before the next command (the cuff commits; hass-omron: 1 s).
    public var clockSettle: Duration = .seconds(1)

    public init(allRecords: Bool = false, keepUnread: Bool = false, setTime: Bool = true, pair: Bool = false) {
        self.allRecords = allRecords
        self.keepUnread = keepUnread
        self.setTime = setTime
        self.pair = pair
    }
}

/// One record read from a user's ring.
public struct OmronSyncedReading: Sendable, Hashable {
    /// 1-based, in the order of the users' start addresses.
    public var user: Int
    public var slot: Int
    public var reading: OmronReading
    public var raw: [UInt8]
}

/// How an Omron session ended.
public enum OmronSessionOutcome: Sendable, Hashable {
    case completed
    /// The cuff refused our key (`81` with a non-zero status): paired with another key, or latched.
    case keyRefused(status: UInt8)
    /// Key programming never got `82 00`: the cuff is not in pairing mode.
    case notInPairingMode
    /// `82 0F`: key programming over a link that is not encrypted or bonded.
    case linkNotEncrypted
    /// `82` with another status: a refusal latched until the cuff is power-cycled.
    case keyLatched(status: UInt8)
    /// No reply after every attempt.
    case timedOut(what: String)
    /// Replies came, but every attempt's was refused (the last: `last`), a broken frame from a
    /// cuff or a link that corrupts them.
    case refusedReplies(what: String, last: OmronError)
    case disconnected
    /// A non-zero status byte from the cuff (e.g. 0xE5 after a bad clock write).
    case deviceStatus(command: String, status: UInt8)
    case protocolError(OmronError)
}

/// The central side of the Omron protocol as a state machine: unlock or pair, subscribe, start,
/// read the settings (index + clock), set the clock once, read the records, mark them read, end.
///
/// Events in, actions out; each state's data lives in its case. The caller performs the actions
/// in order, feeds back notifications and fires the timer it was asked for.
public struct OmronSession: Sendable {
    public enum Event: Sendable, Hashable {
        case start
        case notified(OmronCharacteristic, [UInt8])
        /// The timer asked for by the last `setTimer` fired.
        case timer
        case disconnected
    }

    public enum Action: Sendable, Hashable {
        case subscribe(OmronCharacteristic)
        case write(OmronCharacteristic, [UInt8])
        case setTimer(Timestamp)
        /// The cuff's clock read (local time as seconds since 1970) and its drift from ours, in s.
        case clock(cuffLocalSeconds: Int64?, driftSeconds: Int64?)
        /// The cuff refused the clock write with this status: its clock stays as it was, and the
        /// sync goes on (setting the clock is optional, omron.md §2 step 5).
        case clockRefused(status: UInt8)
        case reading(OmronSyncedReading)
        /// A slot that did not decode (other than an empty one); the session goes on.
        case badRecord(user: Int, slot: Int, OmronError)
        /// Slots that did not decode (this many): the unread counters are not cleared, so the cuff
        /// still counts those records unread and the next sync reads them again.
        case countersKept(badRecords: Int)
        case finished(OmronSessionOutcome)
    }

    /// One command on the wire, waiting for its reply.
    public struct Pending: Sendable, Hashable {
        public var frame: OmronFrame
        public var attempt: Int
        public var deadline: Timestamp
    }

    /// The rest of a transfer after the settings block.
    public struct Transfer: Sendable, Hashable {
        public var queue: [Step]
        /// Per run: slots and the bytes read so far.
        public var runs: [OmronSlotRun]
        public var buffers: [[UInt8]]
    }

    public enum Step: Sendable, Hashable {
        case read(address: UInt16, count: Int, run: Int)
        case write(address: UInt16, data: [UInt8], settle: Bool)
        /// The unread-counter write ("every record read"): left out when a slot did not decode.
        case markRead(address: UInt16, data: [UInt8])
        case end
    }

    public enum PairingStep: Sendable, Hashable {
        /// `02`+zeros sent; waiting for `82 00`.
        case probing(attempt: Int)
        /// `00`+key sent; waiting for `80 00`.
        case programming
    }

    public enum State: Sendable, Hashable {
        case idle
        case pairing(PairingStep, deadline: Timestamp)
        /// `01`+key or `11`+token sent.
        case unlocking(attempt: Int, deadline: Timestamp)
        case starting(Pending)
        case readingSettings(Pending, settings: [UInt8])
        case transferring(Pending, Transfer)
        /// After the clock write: the cuff commits before the next command.
        case settling(until: Timestamp, Transfer)
        case ending(Pending)
        case finished(OmronSessionOutcome)
    }

    public let profile: OmronProfile
    public let options: OmronSyncOptions
    public private(set) var state: State = .idle
    /// The host's local time (seconds since 1970, local date and time read as UTC) at `start`, and
    /// the monotonic instant it was taken; the session's "now" moves with the monotonic events.
    private let localAtStart: Int64
    private var startedAt: Timestamp?
    private var assembler: OmronReassembler
    /// Why the last reply to the frame being sent (any attempt) was refused: a session that gets
    /// only such replies says so when the attempts run out, not "no reply".
    private var refused: OmronError?
    public private(set) var readings = 0
    /// Slots read that did not decode (not empty ones).
    public private(set) var badRecords = 0
    public private(set) var driftSeconds: Int64?

    public init(profile: OmronProfile, options: OmronSyncOptions = OmronSyncOptions(), localSeconds: Int64) {
        self.profile = profile
        self.options = options
        localAtStart = localSeconds
        assembler = OmronReassembler(transport: profile.transport)
    }

    public var isFinished: Bool { if case .finished = state { true } else { false } }

    private func local(_ now: Timestamp) -> Int64 {
        localAtStart + Int64((now - (startedAt ?? now)).secondsDouble.rounded(.down))
    }

    // MARK: event handling

    /// Takes `event` at `now`; appends the actions it calls for to `out`, in order (the
    /// ``ActionMachine`` convention: the driver owns `out` and empties it between events).
    public mutating func handle(_ event: Event, now: Timestamp, into out: inout [Action]) {
        switch (state, event) {
        case (.finished, _): return
        case (.idle, .start):
            startedAt = now
            begin(now, &out)
        case (.idle, _): return
        case (_, .disconnected): finish(.disconnected, &out)
        case let (_, .notified(.unlock, bytes)): unlockReply(bytes, now, &out)
        case let (_, .notified(.rx(ch), bytes)): rxPiece(ch, bytes, now, &out)
        case (_, .timer): timer(now, &out)
        default: return
        }
    }

    private mutating func finish(_ o: OmronSessionOutcome, _ out: inout [Action]) {
        state = .finished(o)
        out.append(.finished(o))
    }

    private mutating func begin(_ now: Timestamp, _ out: inout [Action]) {
        // RX channel 0 first: on classic cuffs it triggers the OS bond (§3.1 step 0).
        for ch in 0..<profile.transport.channelCount { out.append(.subscribe(.rx(ch))) }
        switch profile.pairing {
        case .customKey:
            out.append(.subscribe(.unlock))
            if options.pair {
                probe(attempt: 1, now, &out)
            } else {
                unlock(attempt: 1, now, &out)
            }
        case .token:
            out.append(.subscribe(.unlock))
            unlock(attempt: 1, now, &out)
        case .bondOnly:
            send(.start, attempt: 1, now, &out) { .starting($0) }
        }
    }

    private mutating func probe(attempt: Int, _ now: Timestamp, _ out: inout [Action]) {
        let deadline = now + options.pairingProbeWait
        state = .pairing(.probing(attempt: attempt), deadline: deadline)
        out.append(.write(.unlock, [0x02] + [UInt8](repeating: 0, count: 16)))
        out.append(.setTimer(deadline))
    }

    private mutating func unlock(attempt: Int, _ now: Timestamp, _ out: inout [Action]) {
        let deadline = now + options.replyTimeout
        state = .unlocking(attempt: attempt, deadline: deadline)
        let bytes =
            profile.pairing == .token
            ? [0x11] + options.token.prefix(4) + [UInt8](repeating: 0, count: 15)
            : [0x01] + options.key
        out.append(.write(.unlock, bytes))
        out.append(.setTimer(deadline))
    }

    private mutating func unlockReply(_ b: [UInt8], _ now: Timestamp, _ out: inout [Action]) {
        guard b.count >= 2 else { return }
        switch state {
        case .pairing where b.allSatisfy({ $0 == 0 }):
            // An all-zero reply: the OS bond did not happen (omron.md §3.1, OB#3), as `82 0F` says.
            return finish(.linkNotEncrypted, &out)
        case .pairing(.probing, _) where b[0] == 0x82:
            if b[1] == 0x0F { return finish(.linkNotEncrypted, &out) }
            guard b[1] == 0x00 else { return finish(.keyLatched(status: b[1]), &out) }
            let deadline = now + options.replyTimeout
            state = .pairing(.programming, deadline: deadline)
            out.append(.write(.unlock, [0x00] + options.key))
            out.append(.setTimer(deadline))
        case .pairing(.programming, _) where b[0] == 0x80:
            guard b[1] == 0x00 else { return finish(.keyRefused(status: b[1]), &out) }
            unlock(attempt: 1, now, &out)
        case .unlocking where profile.pairing == .customKey && b[0] == 0x81:
            guard b[1] == 0x00 else { return finish(.keyRefused(status: b[1]), &out) }
            send(.start, attempt: 1, now, &out) { .starting($0) }
        case .unlocking where profile.pairing == .token && b[0] == 0x91:
            guard b[1] == 0x00 else { return finish(.keyRefused(status: b[1]), &out) }
            send(.start, attempt: 1, now, &out) { .starting($0) }
        default:
            return
        }
    }

    private mutating func timer(_ now: Timestamp, _ out: inout [Action]) {
        switch state {
        case let .pairing(.probing(attempt), deadline) where now >= deadline:
            if attempt < options.pairingProbes {
                probe(attempt: attempt + 1, now, &out)
            } else {
                finish(.notInPairingMode, &out)
            }
        case let .pairing(.programming, deadline) where now >= deadline:
            finish(.timedOut(what: "key programming"), &out)
        case let .unlocking(attempt, deadline) where now >= deadline:
            if attempt < options.attempts {
                unlock(attempt: attempt + 1, now, &out)
            } else {
                finish(.timedOut(what: "unlock"), &out)
            }
        case let .starting(p) where now >= p.deadline: resend(p, now, &out) { .starting($0) }
        case let .readingSettings(p, s) where now >= p.deadline:
            resend(p, now, &out) { .readingSettings($0, settings: s) }
        case let .transferring(p, t) where now >= p.deadline: resend(p, now, &out) { .transferring($0, t) }
        case let .ending(p) where now >= p.deadline: resend(p, now, &out) { .ending($0) }
        case let .settling(until, t) where now >= until: next(t, now, &out)
        default: return
        }
    }

    // MARK: frames

    private mutating func send(
        _ f: OmronFrame, attempt: Int, _ now: Timestamp, _ out: inout [Action], _ make: (Pending) -> State
    ) {
        let p = Pending(frame: f, attempt: attempt, deadline: now + options.replyTimeout)
        if attempt == 1 { refused = nil }
        state = make(p)
        assembler = OmronReassembler(transport: profile.transport)
        for piece in profile.transport.split(f.encode()) { out.append(.write(.tx(piece.channel), piece.bytes)) }
        out.append(.setTimer(p.deadline))
    }

    private mutating func resend(
        _ p: Pending, _ now: Timestamp, _ out: inout [Action], _ make: (Pending) -> State
    ) {
        guard p.attempt < options.attempts else {
            let what = Self.name(p.frame)
            return finish(refused.map { .refusedReplies(what: what, last: $0) } ?? .timedOut(what: what), &out)
        }
        send(p.frame, attempt: p.attempt + 1, now, &out, make)
    }

    static func name(_ f: OmronFrame) -> String {
        switch f.kind {
        case .start: "start"
        case .end: "end"
        case .read: "read of 0x" + Hex.digits(f.address, 4)
        case .write: "write to 0x" + Hex.digits(f.address, 4)
        case nil: "frame"
        }
    }

    private var pending: Pending? {
        switch state {
        case let .starting(p), let .readingSettings(p, _), let .transferring(p, _), let .ending(p): p
        default: nil
        }
    }

    private mutating func rxPiece(_ ch: Int, _ bytes: [UInt8], _ now: Timestamp, _ out: inout [Action]) {
        guard let p = pending else { return }
        // A broken reply is dropped and the retry timer runs (hass-omron); why is kept.
        let reply: OmronFrame
        do {
            guard let complete = try assembler.receive(channel: ch, bytes) else { return }
            reply = try OmronFrame.decode(complete)
        } catch {
            refused = error
            return
        }
        let want = p.frame.type | OmronFrame.replyBit
        if reply.type == 0x8F00, p.frame.kind != .end {
            return finish(.deviceStatus(command: Self.name(p.frame), status: reply.status), &out)
        }
        guard reply.type == want else {
            refused = OmronError(
                .unexpectedType, field: "type", offset: 1,
                detail: "0x\(Hex.digits(reply.type, 4)), not 0x\(Hex.digits(want, 4))")
            return
        }
        if p.frame.kind == .read || p.frame.kind == .write, reply.address != p.frame.address {
            refused = OmronError(
                .addressMismatch, field: "address", offset: 3,
                detail: "0x\(Hex.digits(reply.address, 4)), not 0x\(Hex.digits(p.frame.address, 4))")
            return
        }
        if reply.status != 0 {
            if case var .transferring(_, t) = state, case .write(_, _, true)? = t.queue.first {
                out.append(.clockRefused(status: reply.status))
                t.queue.removeFirst()
                return next(t, now, &out)
            }
            return finish(.deviceStatus(command: Self.name(p.frame), status: reply.status), &out)
        }
        if p.frame.kind == .read, reply.data.count != Int(p.frame.size) {
            // Short data (hass-omron drops it too).
            refused = OmronError(
                .invalidLength, field: "data", offset: 6, detail: "\(reply.data.count) bytes, not \(p.frame.size)")
            return
        }
        replied(reply, now, &out)
    }

    private mutating func replied(_ reply: OmronFrame, _ now: Timestamp, _ out: inout [Action]) {
        switch state {
        case .starting:
            if options.pair { return send(.end, attempt: 1, now, &out) { .ending($0) } }
            readSettings([], now, &out)
        case let .readingSettings(_, settings):
            readSettings(settings + reply.data, now, &out)
        case var .transferring(_, t):
            if case let .read(_, _, run) = t.queue.first {
                // Each slot decoded as soon as its bytes are in (a fault in a later block of the
                // run keeps the readings before it): those the buffer completes now.
                let (size, count) = (profile.slotSize, t.runs[run].count)
                func slots(_ bytes: Int) -> Int { min(bytes / size, count) }
                let before = slots(t.buffers[run].count)
                t.buffers[run] += reply.data
                decodeSlots(t.runs[run], t.buffers[run], from: before, to: slots(t.buffers[run].count), &out)
            }
            let settle: Bool = if case .write(_, _, true) = t.queue.first { true } else { false }
            t.queue.removeFirst()
            if settle {
                let until = now + options.clockSettle
                state = .settling(until: until, t)
                return out.append(.setTimer(until))
            }
            next(t, now, &out)
        case .ending:
            finish(.completed, &out)
        default:
            return
        }
    }

    private mutating func readSettings(_ have: [UInt8], _ now: Timestamp, _ out: inout [Action]) {
        let total = profile.settingsLength
        if have.count < total {
            let n = min(profile.block, total - have.count)
            return send(.read(profile.settingsRead + UInt16(have.count), count: n), attempt: 1, now, &out) {
                .readingSettings($0, settings: have)
            }
        }
        plan(settings: have, now, &out)
    }

    /// With the settings block in hand: report the clock, then queue the clock write, the record
    /// reads, the unread-counter write and **end**.
    private mutating func plan(settings: [UInt8], _ now: Timestamp, _ out: inout [Action]) {
        let c = profile.clock
        let window = Array(settings[c.offset..<c.offset + c.length])
        let cuff = OmronClockCodec.decode(window, layout: c.layout)?.unixSeconds
        let host = local(now)
        driftSeconds = cuff.map { $0 - host }
        out.append(.clock(cuffLocalSeconds: cuff, driftSeconds: driftSeconds))

        let entries: [OmronIndexEntry]
        do {
            entries = try profile.index.decode(settings[...])
        } catch {
            return finish(.protocolError(error), &out)
        }
        var queue: [Step] = []
        if options.setTime {
            // The session's only clock write, carrying the current time (hass-omron #190/#191).
            let w = OmronClockCodec.encode(DateTime(unixSeconds: host), into: window, clock: c)
            queue.append(.write(address: profile.settingsWrite + UInt16(c.offset), data: w, settle: true))
        }
        var runs: [OmronSlotRun] = []
        for (u, e) in entries.enumerated() {
            if options.allRecords {
                let n = profile.users[u].records
                let next = profile.index.nextSlot(e, records: n) ?? 0
                runs += [
                    OmronSlotRun(user: u, slot: next, count: n - next), OmronSlotRun(user: u, slot: 0, count: next),
                ]
                .filter { $0.count > 0 }
            } else {
                runs += OmronReadPlan.unread(profile: profile, user: u, entry: e)
            }
        }
        for (i, r) in runs.enumerated() {
            queue += OmronReadPlan.reads(profile: profile, runs: [r]).map {
                .read(address: $0.address, count: $0.count, run: i)
            }
        }
        let anyUnread = entries.enumerated().contains {
            profile.index.unreadCount($0.element, records: profile.users[$0.offset].records) > 0
        }
        if !options.keepUnread, anyUnread {
            // Every counter to 0x8000 ("none unread"), cursors kept, written where the cuff reads writes.
            var block = settings
            profile.index.encode(
                entries.map { OmronIndexEntry(cursor: $0.cursor, unread: OmronIndexLayout.clearValue) }, into: &block)
            let r = profile.markReadRange
            queue.append(.markRead(address: profile.settingsWrite + UInt16(r.lowerBound), data: Array(block[r])))
        }
        queue.append(.end)
        next(Transfer(queue: queue, runs: runs, buffers: runs.map { _ in [] }), now, &out)
    }

    private mutating func next(_ t: Transfer, _ now: Timestamp, _ out: inout [Action]) {
        switch t.queue.first {
        case let .read(address, count, _)?:
            send(.read(address, count: count), attempt: 1, now, &out) { .transferring($0, t) }
        case let .write(address, data, _)?:
            send(.write(address, data), attempt: 1, now, &out) { .transferring($0, t) }
        case let .markRead(address, data)?:
            // A slot that did not decode is no record read (probe W: the cuff was told all four
            // were taken, the store held one): the counters stay, and the next sync reads again.
            guard badRecords == 0 else {
                out.append(.countersKept(badRecords: badRecords))
                var rest = t
                rest.queue.removeFirst()
                return next(rest, now, &out)
            }
            send(.write(address, data), attempt: 1, now, &out) { .transferring($0, t) }
        case .end?, nil: send(.end, attempt: 1, now, &out) { .ending($0) }
        }
    }

    /// Slots `from..<to` of run `r`, whose bytes so far are `bytes`.
    private mutating func decodeSlots(
        _ r: OmronSlotRun, _ bytes: [UInt8], from: Int, to: Int, _ out: inout [Action]
    ) {
        for k in from..<max(from, to) {
            let raw = Array(bytes[k * profile.slotSize..<(k + 1) * profile.slotSize])
            do {
                let reading = try OmronRecordCodec.decode(raw[...], layout: profile.layout, slotSize: profile.slotSize)
                readings += 1
                out.append(.reading(OmronSyncedReading(user: r.user + 1, slot: r.slot + k, reading: reading, raw: raw)))
            } catch  where error.code == .emptyRecord {
                continue
            } catch {
                badRecords += 1
                out.append(.badRecord(user: r.user + 1, slot: r.slot + k, error))
            }
        }
    }
}

extension OmronSession {
    /// ``handle(_:now:into:)`` into a new array (tests, and drivers off the hot path).
    public mutating func handle(_ event: Event, now: Timestamp) -> [Action] {
        var out: [Action] = []
        handle(event, now: now, into: &out)
        return out
    }
}
