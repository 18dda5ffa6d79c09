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

    public let profile: OmronProfile
    var tx: OmronReassembler
    var rx: OmronReassembler
    /// The last command the host sent, waiting for its reply.
    var command: OmronFrame?
    /// Bytes the cuff returned, by EEPROM address (this session's).
    var memory: [Int: UInt8] = [:]
    var decoded: Set<Int> = []
    var clockSeen = false

    public init(profile: OmronProfile) {
        self.profile = profile
        tx = OmronReassembler(transport: profile.transport)
        rx = OmronReassembler(transport: profile.transport)
    }

    /// The link went down: a new connection starts with nothing read.
    public mutating func reset() { self = OmronObserver(profile: profile) }

    /// The host wrote `bytes` to `c`.
    public mutating func written(_ c: OmronCharacteristic, _ bytes: [UInt8]) -> [Output] {
        guard case let .tx(ch) = c else { return [] }
        do {
            guard let whole = try tx.receive(channel: ch, bytes) else { return [] }
            let f = try OmronFrame.decode(whole)
            if f.kind == .start { memory = [:]; decoded = []; clockSeen = false }
            command = f
            return []
        } catch {
            return [.note("host frame: \(error.message)")]
        }
    }

    /// The cuff notified `bytes` on `c`.
    public mutating func notified(_ c: OmronCharacteristic, _ bytes: [UInt8]) -> [Output] {
        guard case let .rx(ch) = c else { return [] }
        let reply: OmronFrame
        do {
            guard let whole = try rx.receive(channel: ch, bytes) else { return [] }
            reply = try OmronFrame.decode(whole)
        } catch {
            return [.note("cuff frame: \(error.message)")]
        }
        guard let cmd = command, cmd.kind == .read, reply.type == 0x8100, reply.address == cmd.address, reply.status == 0,
              reply.data.count == Int(cmd.size) else { return [] }
        command = nil
        for (i, b) in reply.data.enumerated() { memory[Int(reply.address) + i] = b }
        return harvest(from: Int(reply.address), count: reply.data.count)
    }

    mutating func harvest(from start: Int, count: Int) -> [Output] {
        var out: [Output] = []
        let end = start + count
        let clockAt = Int(profile.settingsRead) + profile.clock.offset
        if !clockSeen, start < clockAt + profile.clock.length, end > clockAt,
           let w = bytes(clockAt, profile.clock.length) {
            clockSeen = true
            out.append(.clock(cuffLocalSeconds: OmronClockCodec.decode(w, layout: profile.clock.layout)?.unixSeconds))
        }
        for (u, area) in profile.users.enumerated() {
            let a0 = Int(area.start), a1 = a0 + area.records * profile.slotSize
            guard start < a1, end > a0 else { continue }
            let first = max(0, (start - a0) / profile.slotSize), last = min(area.records - 1, (end - 1 - a0) / profile.slotSize)
            guard first <= last else { continue }
            for slot in first ... last {
                let at = a0 + slot * profile.slotSize
                guard !decoded.contains(at), let raw = bytes(at, profile.slotSize) else { continue }
                decoded.insert(at)
                do {
                    let r = try OmronRecordCodec.decode(raw[...], layout: profile.layout, slotSize: profile.slotSize)
                    out.append(.reading(OmronSyncedReading(user: u + 1, slot: slot, reading: r, raw: raw)))
                } catch where error.code == .emptyRecord {
                    continue
                } catch {
                    out.append(.note("user \(u + 1) slot \(slot): \(error.message)"))
                }
            }
        }
        return out
    }

    func bytes(_ at: Int, _ n: Int) -> [UInt8]? {
        var b: [UInt8] = []
        b.reserveCapacity(n)
        for i in at ..< at + n {
            guard let v = memory[i] else { return nil }
            b.append(v)
        }
        return b
    }
}
