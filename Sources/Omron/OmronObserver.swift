// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore

/// Follows a captured Omron session as a third party: the host's writes and the cuff's
/// notifications, channel by channel, in capture order. It rebuilds the frames, keeps the bytes
/// each read returned, and hands out every record slot the session read whole, once — the same
/// readings the live session decoded (`cuff replay` of an Omron capture).
public struct OmronObserver: Sendable {
    public enum Output: Sendable, Hashable {
        case reading(OmronSyncedReading)
        /// The clock window as the session read it (local seconds; nil when not a valid time).
        case clock(cuffLocalSeconds: Int64?)
        /// A frame that did not decode, or a slot that is not a record (other than an empty one).
        case note(String)
    }

    /// The profile the traffic fits (the first candidate until the reads narrow them).
    public var profile: OmronProfile { candidates[0] }
    /// Profiles of the transport the traffic can still be; one once the reads tell them apart.
    var candidates: [OmronProfile]
    var settled: Bool
    /// Every read reply's (address, length), in order, for narrowing the candidates.
    var reads: [(address: Int, count: Int)] = []
    var tx: OmronReassembler
    var rx: OmronReassembler
    /// The last command the host sent, waiting for its reply.
    var command: OmronFrame?
    /// Bytes the cuff returned, by EEPROM address (this session's).
    var memory: [Int: UInt8] = [:]
    var decoded: Set<Int> = []
    var clockSeen = false

    public init(profile: OmronProfile) {
        candidates = [profile]
        settled = true
        tx = OmronReassembler(transport: profile.transport)
        rx = OmronReassembler(transport: profile.transport)
    }

    /// A capture that does not say the model: the profiles of `transport` the reads fit (their
    /// settings address and record areas); readings come out once one map is left (profiles
    /// with the same map decode alike).
    public init(transport: OmronTransport, preferring first: OmronProfile? = nil) {
        let all = OmronCatalog.profiles.filter { $0.transport == transport }
        candidates = (first.map { [$0] } ?? []) + all.filter { $0 != first }
        settled = false
        tx = OmronReassembler(transport: transport)
        rx = OmronReassembler(transport: transport)
    }

    /// The link went down: a new connection starts with nothing read.
    public mutating func reset() {
        tx = OmronReassembler(transport: profile.transport)
        rx = OmronReassembler(transport: profile.transport)
        command = nil
        memory = [:]
        decoded = []
        clockSeen = false
        reads = []
    }

    /// Keeps the candidates every read so far fits: the first read after start is the settings
    /// block, every other lies in a user area on a slot boundary (or in the settings areas).
    mutating func narrow() {
        guard !settled, let first = reads.first else { return }
        let fits = candidates.filter { p in
            guard Int(p.settingsRead) == first.address else { return false }
            return reads.dropFirst().allSatisfy { r in
                let settings = Int(p.settingsRead)..<Int(p.settingsRead) + p.settingsLength
                if settings.contains(r.address) { return true }
                return p.users.contains { a in
                    let start = Int(a.start), end = start + a.records * p.slotSize
                    return r.address >= start && r.address + r.count <= end
                        && ((r.address - start) % p.slotSize == 0 || r.count < p.slotSize)
                }
            }
        }
        // …and whose record layout decodes every whole slot read so far.
        let decoding = fits.filter { p in slots(p).allSatisfy { s in Self.decodes(s.raw, p) } }
        if !decoding.isEmpty { candidates = decoding } else if !fits.isEmpty { candidates = fits }
        // Settled once every candidate reads the same slots of the same users the same way, and
        // would read the rest of the memory the same way too: candidates that agree on user 1's
        // first slots but lay user 2 elsewhere wait for the reads to tell them apart, or for the
        // session's end (probe A2: a HEM-7361T capture settled on HEM-7150T, whose map has no
        // user 2, and the 140 readings read from there were dropped).
        let ways = Set(
            candidates.map { p in
                "\(p.layout)|\(p.slotSize)|\(p.users)|\(p.clock)|"
                    + slots(p).map { "\($0.user):\($0.slot)" }.joined(separator: ",")
            })
        if ways.count == 1, reads.count > 1, !slots(candidates[0]).isEmpty { settled = true }
    }

    /// True when `raw` is a plausible record (or an empty slot) of `p`'s layout: hass-omron's
    /// driver filter (sys 60–280, dia 30–180, pulse 30–240, dia below sys, year 2010 on) tells a
    /// bit-packed slot read as byte-aligned (dia above sys, pulse 26: §10 #1) from a real one.
    static func decodes(_ raw: [UInt8], _ p: OmronProfile) -> Bool {
        do {
            let r = try OmronRecordCodec.decode(raw[...], layout: p.layout, slotSize: p.slotSize)
            return (60...280).contains(r.systolic) && (30...180).contains(r.diastolic) && (30...240).contains(r.pulse)
                && r.diastolic < r.systolic && r.time.year >= 2010
        } catch {
            return error.code == .emptyRecord
        }
    }

    /// The whole slots the reads so far cover under `p`'s map: user (0-based), slot, bytes.
    func slots(_ p: OmronProfile) -> [(user: Int, slot: Int, raw: [UInt8])] {
        var out: [(Int, Int, [UInt8])] = []
        for r in reads {
            for (u, area) in p.users.enumerated() {
                let a0 = Int(area.start), a1 = a0 + area.records * p.slotSize
                guard r.address < a1, r.address + r.count > a0 else { continue }
                let first = max(0, (r.address - a0) / p.slotSize),
                    last = min(area.records - 1, (r.address + r.count - 1 - a0) / p.slotSize)
                guard first <= last else { continue }
                for slot in first...last {
                    if let raw = bytes(a0 + slot * p.slotSize, p.slotSize) { out.append((u, slot, raw)) }
                }
            }
        }
        return out
    }

    /// The session ended: a capture that never told the profiles apart decodes with the first
    /// that is left (their readings agree on everything read). Each event appends what it gives
    /// to `out` (the ``ActionMachine`` convention).
    public mutating func finish(into out: inout [Output]) {
        guard !settled, reads.count > 1 else { return }
        settled = true
        harvestAllRead(into: &out)
    }

    /// The host wrote `bytes` to `c`.
    public mutating func written(_ c: OmronCharacteristic, _ bytes: [UInt8], into out: inout [Output]) {
        guard case let .tx(ch) = c else { return }
        let f: OmronFrame
        do {
            guard let whole = try tx.receive(channel: ch, bytes) else { return }
            f = try OmronFrame.decode(whole)
        } catch {
            return out.append(.note("host frame: \(error.message)"))
        }
        if f.kind == .end { finish(into: &out) }
        if f.kind == .start { memory = [:]; decoded = []; clockSeen = false; if !settled { reads = [] } }
        command = f
    }

    /// The cuff notified `bytes` on `c`.
    public mutating func notified(_ c: OmronCharacteristic, _ bytes: [UInt8], into out: inout [Output]) {
        guard case let .rx(ch) = c else { return }
        let reply: OmronFrame
        do {
            guard let whole = try rx.receive(channel: ch, bytes) else { return }
            reply = try OmronFrame.decode(whole)
        } catch {
            return out.append(.note("cuff frame: \(error.message)"))
        }
        guard let cmd = command, cmd.kind == .read, reply.type == 0x8100, reply.address == cmd.address,
            reply.status == 0,
            reply.data.count == Int(cmd.size)
        else { return }
        command = nil
        for (i, b) in reply.data.enumerated() { memory[Int(reply.address) + i] = b }
        if !settled {
            reads.append((Int(reply.address), reply.data.count))
            narrow()
            guard settled else { return }
            // Now the map is known: everything read so far, in order.
            return harvestAllRead(into: &out)
        }
        harvest(from: Int(reply.address), count: reply.data.count, into: &out)
    }

    /// ``finish(into:)`` into a new array (tests).
    public mutating func finish() -> [Output] {
        var out: [Output] = []
        finish(into: &out)
        return out
    }

    /// ``written(_:_:into:)`` into a new array (tests).
    public mutating func written(_ c: OmronCharacteristic, _ bytes: [UInt8]) -> [Output] {
        var out: [Output] = []
        written(c, bytes, into: &out)
        return out
    }

    /// ``notified(_:_:into:)`` into a new array (tests).
    public mutating func notified(_ c: OmronCharacteristic, _ bytes: [UInt8]) -> [Output] {
        var out: [Output] = []
        notified(c, bytes, into: &out)
        return out
    }

    /// Every read so far, in order, as ``harvest(from:count:into:)`` takes it.
    mutating func harvestAllRead(into out: inout [Output]) {
        for r in reads { harvest(from: r.address, count: r.count, into: &out) }
    }

    mutating func harvest(from start: Int, count: Int, into out: inout [Output]) {
        let end = start + count
        let clockAt = Int(profile.settingsRead) + profile.clock.offset
        if !clockSeen, start < clockAt + profile.clock.length, end > clockAt,
            let w = bytes(clockAt, profile.clock.length)
        {
            clockSeen = true
            out.append(.clock(cuffLocalSeconds: OmronClockCodec.decode(w, layout: profile.clock.layout)?.unixSeconds))
        }
        for (u, area) in profile.users.enumerated() {
            let a0 = Int(area.start), a1 = a0 + area.records * profile.slotSize
            guard start < a1, end > a0 else { continue }
            let first = max(0, (start - a0) / profile.slotSize),
                last = min(area.records - 1, (end - 1 - a0) / profile.slotSize)
            guard first <= last else { continue }
            for slot in first...last {
                let at = a0 + slot * profile.slotSize
                guard !decoded.contains(at), let raw = bytes(at, profile.slotSize) else { continue }
                decoded.insert(at)
                do {
                    let r = try OmronRecordCodec.decode(raw[...], layout: profile.layout, slotSize: profile.slotSize)
                    out.append(.reading(OmronSyncedReading(user: u + 1, slot: slot, reading: r, raw: raw)))
                } catch  where error.code == .emptyRecord {
                    continue
                } catch {
                    out.append(.note("user \(u + 1) slot \(slot): \(error.message)"))
                }
            }
        }
    }

    func bytes(_ at: Int, _ n: Int) -> [UInt8]? {
        var b: [UInt8] = []
        b.reserveCapacity(n)
        for i in at..<at + n {
            guard let v = memory[i] else { return nil }
            b.append(v)
        }
        return b
    }
}
