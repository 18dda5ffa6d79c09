// SPDX-License-Identifier: GPL-2.0-or-later
import Capture
import CMallocCounter
import CuffCore
import CuffSession
#if canImport(Glibc)
import Glibc
#endif

/// Writes a btsnoop of at least `megabytes` MB by repeating the sessions in `inputs` one after the
/// other, each copy with timestamps moved past the previous one and its own connection handle
/// (cycling through 0x0001–0x0EFF). Streams: one input's records in memory at a time.
/// A single-fragment ACL record carrying an ATT Handle Value Notification (L2CAP CID 4, opcode 0x1B).
func isATTNotification(_ r: HCIRecord) -> Bool {
    let p = r.payload
    guard p.count >= 9 else { return false }
    let b = p.startIndex
    return p[b + 6] == 0x04 && p[b + 7] == 0x00 && p[b + 8] == 0x1B
}

/// A single-fragment ACL record carrying ATT discovery or a read (MTU exchange, Find Information,
/// Read By Type, Read, Read By Group Type: requests, responses and errors): what a bonded central
/// with a GATT cache does not send when it reconnects.
func isATTDiscovery(_ r: HCIRecord) -> Bool {
    let p = r.payload
    guard p.count >= 9 else { return false }
    let b = p.startIndex
    guard p[b + 6] == 0x04 && p[b + 7] == 0x00 else { return false }
    func discovery(_ op: UInt8) -> Bool { [0x02, 0x03, 0x04, 0x05, 0x08, 0x09, 0x0A, 0x0B, 0x10, 0x11].contains(op) }
    return discovery(p[b + 8]) || (p[b + 8] == 0x01 && p.count >= 10 && discovery(p[b + 9]))
}

/// `short`: every copy but the first (one per input) is a bonded reconnect: no discovery or reads
/// (and no Number Of Completed Packets event right after one), so a session is about 20 records.
/// `sessions`: stop after that many copies (whatever the size).
func makeCapture(out: String, megabytes: Int, inputs: [String], notifications: Int? = nil, short: Bool = false, sessions limit: Int? = nil) {
    do {
        var sessions: [[HCIRecord]] = []
        var reconnects: [[HCIRecord]] = []
        for path in inputs {
            var r = try CaptureReader(path: path)
            var records = try r.readAll()
            if let keep = notifications {
                // Counted per controller and direction: a two-controller log has each notification twice.
                var seen: [String: Int] = [:]
                records = records.filter { rec in
                    guard isATTNotification(rec) else { return true }
                    let key = "\(rec.adapterIndex)/\(rec.direction)"
                    seen[key, default: 0] += 1
                    return seen[key]! <= keep
                }
            }
            sessions.append(records)
            if short {
                var dropped = false
                var dropping: [String: Bool] = [:]  // per direction: the frame being continued was dropped
                reconnects.append(records.filter { rec in
                    if case .aclData = rec.kind, rec.payload.count >= 2 {
                        let key = "\(rec.adapterIndex)/\(rec.direction)"
                        if (rec.payload[rec.payload.startIndex + 1] >> 4) & 3 != 1 { dropping[key] = isATTDiscovery(rec) }
                        if dropping[key] == true {
                            dropped = true
                            return false
                        }
                    }
                    defer { dropped = false }
                    if case .event = rec.kind, rec.payload.first == 0x13, dropped { return false }
                    return true
                })
            }
        }
        var writer = try BTSnoopWriter(path: out, datalink: .monitor)
        let target = Int64(megabytes) * 1_000_000
        var written: Int64 = 16
        var copy = 0
        var clock = sessions.first?.first?.timestamp.nanoseconds ?? 0
        while written < target, copy < (limit ?? Int.max) {
            let s = short && copy >= sessions.count ? reconnects[copy % sessions.count] : sessions[copy % sessions.count]
            guard let first = s.first, let last = s.last else { break }
            let shift = clock - first.timestamp.nanoseconds
            let handle = UInt16(1 + copy % 0x0EFF)
            for var r in s {
                r.timestamp = Timestamp(nanoseconds: r.timestamp.nanoseconds + shift)
                setHandle(&r, handle)
                try writer.write(r)
                written += 24 + Int64(r.payload.count)
            }
            clock += (last.timestamp.nanoseconds - first.timestamp.nanoseconds) + 1_000_000_000
            copy += 1
        }
        try writer.flush()
        print("make-capture: \(out): \(written) bytes, \(copy) sessions")
    } catch {
        print("make-capture: \(error)")
        exit(1)
    }
}

/// Rewrites the connection handle of ACL data, LE Connection Complete, Disconnection Complete and
/// Number Of Completed Packets.
func setHandle(_ r: inout HCIRecord, _ h: UInt16) {
    func put(_ i: Int) {
        guard r.payload.count >= i + 2 else { return }
        r.payload[i] = UInt8(h & 0xFF)
        r.payload[i + 1] = (r.payload[i + 1] & 0xF0) | UInt8(h >> 8)
    }
    switch r.kind {
    case .aclData: put(0)
    case .event:
        guard r.payload.count >= 2 else { return }
        switch r.payload[0] {
        case 0x3E where r.payload.count > 2 && [0x01, 0x0A, 0x29].contains(r.payload[2]): put(4)
        case 0x05: put(3)
        case 0x13: put(3)
        default: break
        }
    default: break
    }
}

/// Replays `path` in-process (reader → extractor → observer → session machine; no serialisation) and
/// reports throughput and heap allocations per record.
func benchReplay(_ path: String) {
    do {
        var reader = try CaptureReader(path: path)
        var replay = CaptureReplay()
        var out: [CaptureReplay.Output] = []
        var records = 0
        var bytesOut = 0
        let allocs0 = cuff_malloc_count()
        let t0 = now()
        var r = HCIRecord(timestamp: .zero, direction: .received, kind: .other(0), payload: [])
        while try reader.nextFromFile(into: &r) {
            records += 1
            replay.consume(r, into: &out)
            for o in out { if case .emit = o { bytesOut += 1 } }
            out.removeAll(keepingCapacity: true)
        }
        replay.finish(into: &out)
        let t1 = now()
        let allocs = cuff_malloc_count() - allocs0
        let size = Double(reader.offset)
        print("replay \(path): \(records) records, \(Int(size)) bytes, \(replay.sessions) sessions, \(replay.measurements) measurements, \(bytesOut) records out (not serialised)")
        print("replay: \(format3(t1 - t0)) s = \(format3(size / (t1 - t0) / 1e6)) MB/s, \(format3(Double(records) / (t1 - t0) / 1e6)) million records/s; \(format3(Double(allocs) / Double(max(records, 1)))) heap allocations per record")
    } catch {
        print("replay: \(error)")
        exit(1)
    }
}

/// Times each stage of the replay pipeline on `path`: reader alone, reader + extractor.
func benchReplayStages(_ path: String) {
    do {
        var reader = try CaptureReader(path: path)
        var records = 0
        var a0 = cuff_malloc_count()
        var t0 = now()
        var rec = HCIRecord(timestamp: .zero, direction: .received, kind: .other(0), payload: [])
        while try reader.nextFromFile(into: &rec) { records += 1 }
        var t1 = now()
        print("stage reader: \(format3(t1 - t0)) s, \(format3(Double(cuff_malloc_count() - a0) / Double(max(records, 1)))) allocations/record, \(records) records")
        reader = try CaptureReader(path: path)
        var extractor = ATTExtractor()
        var events: [CaptureEvent] = []
        var atts = 0
        a0 = cuff_malloc_count()
        t0 = now()
        while let r = try reader.nextFromFile() {
            events.removeAll(keepingCapacity: true)
            try extractor.consume(r, into: &events)
            atts += events.count
        }
        t1 = now()
        print("stage reader+extractor: \(format3(t1 - t0)) s, \(format3(Double(cuff_malloc_count() - a0) / Double(max(records, 1)))) allocations/record, \(atts) events")
    } catch {
        print("stages: \(error)")
        exit(1)
    }
}

/// Sizes of the values the replay moves around per record.
func printLayouts() {
    print("SessionOutput \(MemoryLayout<SessionOutput>.size) B, ReplayOutput \(MemoryLayout<ReplayOutput>.size) B, ProgressRecord \(MemoryLayout<ProgressRecord>.size) B, HCIRecord \(MemoryLayout<HCIRecord>.size) B")
}

/// Per-session cost: replays the one-session capture `path` `n` times in-process (no
/// serialisation), once whole and once without its cuff-pressure notifications.
func benchSessionCost(_ path: String, _ n: Int, onlyGeneric: Bool = false) {
    do {
        var reader = try CaptureReader(path: path)
        let all = try reader.readAll()
        let withoutICP = all.filter { r in
            !(r.kind == .aclData && r.payload.count > 8 && r.payload[8] == 0x1B)
        }
        for (label, records) in onlyGeneric ? [("without ICP", withoutICP)] : [("whole", all), ("without ICP", withoutICP)] {
            var out: [CaptureReplay.Output] = []
            out.reserveCapacity(1024)
            let a0 = cuff_malloc_count()
            let t0 = now()
            for _ in 0..<n {
                var replay = CaptureReplay()
                for r in records { replay.consume(r, into: &out); out.removeAll(keepingCapacity: true) }
                replay.finish(into: &out)
                out.removeAll(keepingCapacity: true)
            }
            let t1 = now()
            let per = (t1 - t0) / Double(n)
            print("session-cost \(label): \(records.count) records, \(format3(per * 1e6)) µs per session, \(format3(Double(cuff_malloc_count() - a0) / Double(n))) allocations per session")
        }
    } catch {
        print("session-cost: \(error)")
        exit(1)
    }
}
