// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore

/// A characteristic of the Omron service, as both sides name it.
public enum OmronCharacteristic: Sendable, Hashable, CustomStringConvertible {
    case tx(Int)
    case rx(Int)
    case unlock

    public var description: String {
        switch self {
        case let .tx(i): "TX ch\(i)"
        case let .rx(i): "RX ch\(i)"
        case .unlock: "unlock"
        }
    }
}

/// What can go wrong on a simulated Omron cuff, and how its memory starts (issue #24 item 5).
public enum OmronScenario: String, Sendable, Hashable, CaseIterable {
    /// Every user has some readings, a few of them unread.
    case normal
    /// Every user's ring has wrapped: more readings taken than slots, every slot unread.
    case fullMemory = "full-memory"
    /// User 1 has readings, the last user none (cursor 0x8000).
    case emptyUser = "empty-user"
    /// The battery was changed: the clock restarted at 2000-01-01 00:00:00.
    case clockReset = "clock-reset"
    /// The link drops after the third frame of the first session.
    case droppedLink = "dropped-link"
    /// The cuff was paired with another key; it refuses ours and latches until power-cycled.
    case refusedKey = "refused-key"

    public var summary: String {
        switch self {
        case .normal: "readings for every user, a few unread"
        case .fullMemory: "every user's ring wrapped, every slot unread"
        case .emptyUser: "the last user has no readings (cursor 0x8000)"
        case .clockReset: "clock reset to 2000-01-01 by a battery change"
        case .droppedLink: "the link drops mid-transaction in the first session"
        case .refusedKey: "paired with another key: ours is refused (latched until power-cycled)"
        }
    }
}

/// A simulated Omron cuff as a state machine: channel writes and subscriptions in, notifications
/// out; its EEPROM image holds every user's ring, the index region and the clock window.
///
/// Time is the host's local wall clock in seconds (`localSeconds`: seconds since 1970 of the local
/// date and time read as UTC), passed with every event.
public struct OmronSimulator: Sendable {
    public enum Event: Sendable, Hashable {
        /// The central enabled notifications on a characteristic.
        case subscribe(OmronCharacteristic)
        case write(OmronCharacteristic, [UInt8])
        /// The link went away (or the central disconnected).
        case disconnected
        /// The Bluetooth button: pairing mode on (`-P-` blinks) until a key is programmed.
        case button
        /// Batteries out and in: clears a latched refusal, and resets the clock.
        case powerCycle
    }

    public enum Action: Sendable, Hashable {
        case notify(OmronCharacteristic, [UInt8])
        /// The cuff drops the link.
        case disconnect
    }

    /// The key other open tools program (hass-omron, omblepy): `deadbeaf12341234deadbeaf12341234`.
    public static let defaultKey: [UInt8] = [
        0xDE, 0xAD, 0xBE, 0xAF, 0x12, 0x34, 0x12, 0x34, 0xDE, 0xAD, 0xBE, 0xAF, 0x12, 0x34, 0x12, 0x34,
    ]
    /// Status a real cuff gives at **end** after a clock write with a wrong checksum.
    public static let badClockStatus: UInt8 = 0xE5

    public let profile: OmronProfile
    public let scenario: OmronScenario
    public private(set) var memory: [UInt8]
    /// Every reading each user ever took, oldest first (the ring holds the last N).
    public private(set) var taken: [[OmronReading]]
    public private(set) var unread: [Int]
    /// Custom-key profiles: the programmed key (nil = factory fresh). Others: whether a host is bonded.
    public private(set) var key: [UInt8]?
    public private(set) var paired: Bool
    public private(set) var pairingMode = false
    /// A refused key latches until power-cycled.
    public private(set) var latched = false
    /// The cuff's clock: its reading at host time `clockRef`.
    public private(set) var clockBase: Int64
    public private(set) var clockRef: Int64
    /// Clock writes and end statuses seen, for tests and logs.
    public private(set) var clockWrites = 0
    public private(set) var sessions = 0

    // Per-connection state.
    private var subscribed: Set<OmronCharacteristic> = []
    private var unlocked = false
    private var keyProgramming = false
    private var inTransaction = false
    private var rxAssembler: OmronReassembler
    private var written: [(address: Int, bytes: [UInt8], at: Int64)] = []
    private var framesThisLink = 0
    var dropArmed: Bool
    /// Answers a write to the clock window with this status instead of taking it (a cuff that
    /// refuses to have its clock set; tests).
    var refuseClockWrites: UInt8?
    /// The frame of the first link the link drops at, when ``dropArmed`` (the dropped-link scenario: 3).
    var dropAtFrame = 3

    /// A cuff of `profile` with readings from `seed`; `paired` false starts it factory-fresh.
    public init(
        profile: OmronProfile, scenario: OmronScenario = .normal, seed: UInt64 = 1, paired: Bool = true,
        localSeconds: Int64
    ) {
        self.profile = profile
        self.scenario = scenario
        rxAssembler = OmronReassembler(transport: profile.transport)
        memory = [UInt8](repeating: 0xFF, count: profile.memoryEnd)
        var rng = SeededRandom(seed: seed)
        taken = []
        unread = []
        for (u, area) in profile.users.enumerated() {
            var count: Int
            var fresh: Int
            switch scenario {
            case .fullMemory:
                count = area.records + 1 + Int(rng.next() % 7)
                fresh = area.records
            case .emptyUser where u == profile.users.count - 1 && profile.users.count > 1:
                count = 0; fresh = 0
            case .emptyUser:
                count = 3; fresh = 3
            default:
                count = min(area.records, 3 + Int(rng.next() % 5) + 2 * u)
                fresh = min(count, 2)
            }
            var readings: [OmronReading] = []
            var t = localSeconds - Int64(count + 1) * 21_601 - Int64(u) * 600
            for k in 0..<count {
                t += 21_601 + Int64(rng.next() % 600)
                let sys = 105 + Int(rng.next() % 50), dia = 62 + Int(rng.next() % 30), pulse = 55 + Int(rng.next() % 40)
                readings.append(
                    OmronReading(
                        systolic: sys, diastolic: dia, pulse: pulse, time: DateTime(unixSeconds: t),
                        irregularPulse: rng.next() % 9 == 0,
                        bodyMovement: rng.next() % 7 == 0, cuffOK: rng.next() % 11 != 0, batteryLow: false,
                        position: 0, sequence: UInt16(truncatingIfNeeded: k + 1)))
            }
            // A long ring's random gaps add up to days (probe N: a full HEM-9700T's newest reading
            // 3 days ahead of its clock): every reading is taken before the cuff's clock starts
            // (the newest at least 10 minutes before), as a real cuff's are.
            let late = t - (localSeconds - 600)
            if late > 0 {
                for i in readings.indices {
                    readings[i].time = DateTime(unixSeconds: (readings[i].time.unixSeconds ?? t) - late)
                }
            }
            taken.append(readings.map { Self.stored($0, profile) })
            unread.append(fresh)
        }
        switch scenario {
        case .refusedKey: key = [UInt8](repeating: 0x5A, count: 16)
        default: key = paired ? Self.defaultKey : nil
        }
        self.paired = paired || scenario == .refusedKey
        if profile.pairing != .customKey { key = nil }
        clockRef = localSeconds
        clockBase = scenario == .clockReset ? 946_684_800 : localSeconds - 97  // a cuff clock 97 s slow
        dropArmed = scenario == .droppedLink
        for u in profile.users.indices { renderUser(u) }
        renderIndex()
    }

    /// The cuff's clock at host time `now`.
    public func cuffTime(at now: Int64) -> Int64 { clockBase + (now - clockRef) }

    /// What the cuff's memory holds for user `u`, oldest first.
    public func stored(user u: Int) -> [OmronReading] { Array(taken[u].suffix(profile.users[u].records)) }
    /// The readings not yet sent to a host, oldest first.
    public func unreadReadings(user u: Int) -> [OmronReading] { Array(taken[u].suffix(unread[u])) }

    /// `r` as this model's memory gives it back (fields the layout lacks dropped).
    static func stored(_ r: OmronReading, _ p: OmronProfile) -> OmronReading {
        var r = r
        if p.layout == .hem6401 {
            r.ihbCount = r.ihbCount ?? (r.irregularPulse ? 1 : 0)
            r.movementCount = r.movementCount ?? (r.bodyMovement ? 1 : 0)
        }
        let bytes = OmronRecordCodec.encode(r, layout: p.layout, slotSize: p.slotSize)
        return (try? OmronRecordCodec.decode(bytes[...], layout: p.layout, slotSize: p.slotSize)) ?? r
    }

    /// Takes a new reading for user `u` (as pressing START does).
    public mutating func measure(user u: Int, _ r: OmronReading) {
        taken[u].append(Self.stored(r, profile))
        unread[u] = min(profile.users[u].records, unread[u] + 1)
        renderUser(u)
        renderIndex()
    }

    // MARK: memory image

    private func slotAddress(_ u: Int, _ slot: Int) -> Int { Int(profile.users[u].start) + slot * profile.slotSize }

    private mutating func renderUser(_ u: Int) {
        let n = profile.users[u].records
        for (k, r) in taken[u].enumerated().suffix(n) {
            let a = slotAddress(u, k % n)
            memory.replaceSubrange(
                a..<a + profile.slotSize,
                with: OmronRecordCodec.encode(r, layout: profile.layout, slotSize: profile.slotSize))
        }
    }

    func entry(_ u: Int) -> OmronIndexEntry {
        let n = profile.users[u].records, count = taken[u].count
        guard count > 0 else { return .empty }
        // Next slot (bias −1) or newest slot (bias 0); 0x4000 once the ring has wrapped (a real
        // full HEM-7380T1 showed 0x4000 for "next slot 0"; the flag's meaning is not documented).
        let slot = ((count - 1 - profile.index.bias) % n + n) % n
        let cursor = UInt32(slot) | (count >= n ? 0x4000 : 0)
        return OmronIndexEntry(cursor: cursor, unread: unread[u] == 0 ? OmronIndexLayout.clearValue : UInt32(unread[u]))
    }

    private mutating func renderIndex() {
        let base = Int(profile.settingsRead)
        var block = Array(memory[base..<base + profile.index.size])
        profile.index.encode(profile.users.indices.map(entry), into: &block)
        memory.replaceSubrange(base..<base + profile.index.size, with: block)
    }

    private mutating func renderClock(now: Int64) {
        let a = Int(profile.settingsRead) + profile.clock.offset
        let window = Array(memory[a..<a + profile.clock.length])
        let w = OmronClockCodec.encode(DateTime(unixSeconds: cuffTime(at: now)), into: window, clock: profile.clock)
        memory.replaceSubrange(a..<a + w.count, with: w)
    }

    // MARK: events

    /// Takes `event` at the cuff's local time `now`; appends what it calls for to `out`.
    public mutating func handle(_ event: Event, localSeconds now: Int64, into out: inout [Action]) {
        switch event {
        case let .subscribe(c):
            subscribed.insert(c)
        case .disconnected:
            resetLink()
        case .button:
            pairingMode = true
        case .powerCycle:
            latched = false
            pairingMode = false
            resetLink()
            clockBase = 946_684_800
            clockRef = now
        case let .write(.unlock, bytes):
            unlockWrite(bytes, &out)
        case let .write(.tx(ch), bytes):
            txWrite(ch, bytes, now: now, &out)
        case .write:
            break
        }
    }

    private mutating func resetLink() {
        subscribed = []
        unlocked = false
        keyProgramming = false
        inTransaction = false
        written = []
        framesThisLink = 0
        rxAssembler = OmronReassembler(transport: profile.transport)
    }

    private func reply(_ bytes: [UInt8], _ out: inout [Action]) {
        guard subscribed.contains(.unlock) else { return }
        out.append(.notify(.unlock, bytes + [UInt8](repeating: 0, count: max(0, 16 - bytes.count))))
    }

    private mutating func unlockWrite(_ b: [UInt8], _ out: inout [Action]) {
        guard let op = b.first else { return }
        switch (profile.pairing, op) {
        case (.customKey, 0x02) where b.count == 17:
            // Key programming needs pairing mode; a refusal latched earlier wins.
            // A latched refusal answers key programming with 82 01 (our choice; the code is not documented).
            if latched { return reply([0x82, 0x01], &out) }
            guard pairingMode else { return }
            keyProgramming = true
            return reply([0x82, 0x00], &out)
        case (.customKey, 0x00) where b.count == 17:
            guard keyProgramming else { return }
            key = Array(b[1...])
            paired = true
            pairingMode = false
            keyProgramming = false
            return reply([0x80, 0x00], &out)
        case (.customKey, 0x01) where b.count == 17:
            if !latched, let key, key == Array(b[1...]) {
                unlocked = true
                return reply([0x81, 0x00], &out)
            }
            latched = key != nil
            return reply([0x81, 0x01], &out)
        case (.token, 0x11) where b.count == 20:
            guard paired || pairingMode else { return }
            paired = true
            pairingMode = false
            unlocked = true
            return reply([0x91, 0x00] + b[1...4], &out)
        default:
            return
        }
    }

    private var mayTransfer: Bool {
        switch profile.pairing {
        case .customKey, .token: unlocked
        case .bondOnly: paired || pairingMode
        }
    }

    private mutating func txWrite(_ ch: Int, _ bytes: [UInt8], now: Int64, _ out: inout [Action]) {
        guard ch < profile.transport.channelCount, let frameBytes = try? rxAssembler.receive(channel: ch, bytes) else {
            return
        }
        guard let f = try? OmronFrame.decode(frameBytes), !f.isReply, let kind = f.kind else { return }
        guard mayTransfer, subscribed.contains(.rx(0)) else { return }
        if profile.pairing == .bondOnly { paired = true; pairingMode = false }
        framesThisLink += 1
        if dropArmed, framesThisLink == dropAtFrame {
            dropArmed = false
            resetLink()
            return out.append(.disconnect)
        }
        let answer: OmronFrame
        switch kind {
        case .start:
            inTransaction = true
            written = []
            sessions += 1
            // Classic cuffs answer with 16 device-id bytes (HEM-7280T), modern ones with 8 bytes (HEM-7155T).
            answer =
                profile.transport == .classic
                ? OmronFrame(type: 0x8000, size: 0x10, data: Array("OMRON-SIM-CUFF!!".utf8))
                : OmronFrame(type: 0x8000, size: 0x10)
        case .read:
            guard inTransaction else { answer = OmronFrame(type: 0x8F00, status: 0x01); break }
            renderClock(now: now)
            let a = Int(f.address), n = Int(f.size)
            guard n <= profile.block, n + 8 <= OmronFrame.maxLength else {
                answer = OmronFrame(type: 0x8F00, status: 0x02)
                break
            }
            let data = (a..<a + n).map { $0 < memory.count ? memory[$0] : 0xFF }
            answer = OmronFrame(type: 0x8100, address: f.address, data: data)
        case .write:
            guard inTransaction else { answer = OmronFrame(type: 0x8F00, status: 0x01); break }
            let a = Int(f.address)
            if let status = refuseClockWrites, coversClock(address: a, count: f.data.count) {
                answer = OmronFrame(type: 0x81C0, address: f.address, status: status)
                break
            }
            if a + f.data.count <= memory.count { memory.replaceSubrange(a..<a + f.data.count, with: f.data) }
            written.append((a, f.data, now))
            answer =
                profile.transport == .classic
                ? OmronFrame(type: 0x81C0, address: f.address, data: f.data)
                : OmronFrame(type: 0x81C0, address: f.address, size: UInt8(f.data.count))
        case .end:
            let status = inTransaction ? commit(now: now) : 0x01
            inTransaction = false
            written = []
            answer = OmronFrame(type: 0x8F00, status: status)
        }
        notify(answer.encode(), &out)
    }

    private func notify(_ frame: [UInt8], _ out: inout [Action]) {
        for piece in profile.transport.split(frame) {
            guard subscribed.contains(.rx(piece.channel)) else { continue }
            let padded =
                profile.transport == .classic
                ? piece.bytes + [UInt8](repeating: 0, count: 16 - piece.bytes.count) : piece.bytes
            out.append(.notify(.rx(piece.channel), padded))
        }
    }

    /// Whether a write of `count` bytes at `address` covers the whole clock window.
    private func coversClock(address: Int, count: Int) -> Bool {
        let clockAt = Int(profile.settingsWrite) + profile.clock.offset
        return address <= clockAt && address + count >= clockAt + profile.clock.length
    }

    /// What the cuff keeps at **end**: unread counters written back, and the last clock write.
    private mutating func commit(now: Int64) -> UInt8 {
        let w = Int(profile.settingsWrite)
        var status: UInt8 = 0
        let clockAt = w + profile.clock.offset
        // Only the last clock write of a session counts (hass-omron #190/#191).
        if let last = written.last(where: { coversClock(address: $0.address, count: $0.bytes.count) }) {
            let window = Array(last.bytes[(clockAt - last.address)..<(clockAt - last.address + profile.clock.length)])
            clockWrites += 1
            if let t = OmronClockCodec.decode(window, layout: profile.clock.layout), let secs = t.unixSeconds {
                clockBase = secs
                clockRef = last.at
            } else {
                status = Self.badClockStatus
            }
        }
        for (u, off) in profile.index.unreadOffsets.enumerated() {
            let at = w + off
            guard
                written.contains(where: {
                    $0.address <= at && $0.address + $0.bytes.count >= at + profile.index.entryWidth
                })
            else { continue }
            let v = profile.index.readEntry(memory[...], at: at)
            unread[u] = v == OmronIndexLayout.clearValue ? 0 : min(unread[u], Int(v & profile.index.cursorMask))
        }
        renderIndex()
        return status
    }
}

extension OmronSimulator {
    /// ``handle(_:localSeconds:into:)`` into a new array (tests, and drivers off the hot path).
    public mutating func handle(_ event: Event, localSeconds now: Int64) -> [Action] {
        var out: [Action] = []
        handle(event, localSeconds: now, into: &out)
        return out
    }
}
