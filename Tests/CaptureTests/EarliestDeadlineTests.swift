// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import CuffSession
import Foundation
import Testing
@testable import Capture

/// A replay hands the PDU of a record it takes whole to its session without the session's own
/// deadline check (`deadlinesDone`): that is right only while its cached earliest deadline is
/// exactly the earliest of its open sessions' after every record, which this checks.
@Suite("Replay earliest deadline")
struct EarliestDeadlineTests {
    static func check(_ bytes: [UInt8], _ configuration: CuffSessionConfiguration, _ name: String) -> Int {
        var reader = CaptureReader(source: ArrayByteSource(bytes), chunkSize: 4096)
        var record = HCIRecord(timestamp: .zero, direction: .received, kind: .other(0), payload: [])
        var replay = CaptureReplay(configuration: configuration)
        var out: [CaptureReplay.Output] = []
        var checked = 0
        while (try? reader.next(into: &record)) == true {
            replay.consume(record, into: &out)
            expectExact(replay, "\(name): record \(checked)")
            checked += 1
        }
        return checked
    }

    /// The cached earliest deadline is the open sessions' earliest, and the heap of connections
    /// with a deadline holds exactly those, each under its current deadline, in heap order.
    static func expectExact(_ replay: CaptureReplay, _ what: @autoclosure () -> String) {
        var exact: Timestamp?
        var withDeadline = 0
        var filed = true
        for c in replay.connections.values {
            if let d = c.deadline {
                if exact == nil || d < exact! { exact = d }
                withDeadline += 1
                let i = c.armedAt
                filed = filed && i >= 0 && i < replay.armed.count && replay.armed[i] === c && c.armedDeadline == d
            } else {
                filed = filed && c.armedAt == -1
            }
        }
        let a = replay.armed
        let ordered = a.indices.dropFirst().allSatisfy { i in
            let p = a[(i - 1) / 2], c = a[i]
            return p.armedDeadline < c.armedDeadline
                || (p.armedDeadline == c.armedDeadline && p.serial < c.serial)
        }
        #expect(replay.earliest == exact, "\(what())")
        #expect(filed && a.count == withDeadline && ordered, "\(what()): deadline heap")
    }

    /// Every committed capture (whole and cut short), with the default windows and with windows
    /// short enough that deadlines fall between most PDUs.
    @Test func earliestIsExactAfterEveryRecord() throws {
        var short = CuffSessionConfiguration(address: "")
        short.timeout = .milliseconds(700)
        short.settle = .milliseconds(3)
        short.storedBurstWindow = .milliseconds(2)
        short.observerStepWindow = .milliseconds(1)
        var checked = 0
        for name in committedCaptures() {
            let bytes = Array(try Data(contentsOf: capturesDirectory.appendingPathComponent(name + ".btsnoop")))
            for configuration in [CuffSessionConfiguration(address: ""), short] {
                checked += Self.check(bytes, configuration, name)
                checked += Self.check(Array(bytes.prefix(bytes.count * 3 / 5)), configuration, name + " (cut)")
            }
        }
        #expect(checked > 1000)
    }

    /// Copies of the foreign bluetoothd capture (each opens a central connection and a peripheral
    /// one and never closes them), copy `k` on controllers 2k and 2k + 1, its peer address ending
    /// in `k`, shifted by `shifts[k]` ms; merged by time, the later copy's record first at the
    /// same instant (so the order the connections open is not the copies' order).
    static func copies(_ records: [HCIRecord], shifts: [Int64]) -> [HCIRecord] {
        var all: [(HCIRecord, Int)] = []
        for (k, shift) in shifts.enumerated() {
            for var r in records {
                r.timestamp = r.timestamp.adding(nanoseconds: shift * 1_000_000)
                if r.adapterIndex != 0xFFFF { r.adapterIndex += UInt16(2 * k) }
                // LE (Enhanced) Connection Complete: the address's first byte on the wire is its last in text.
                if case .event = r.kind, r.payload.count >= 14, r.payload[0] == 0x3E,
                    r.payload[2] == 0x01 || r.payload[2] == 0x0A
                {
                    r.payload[8] = UInt8(k)
                }
                all.append((r, k))
            }
        }
        all.sort { $0.0.timestamp < $1.0.timestamp || ($0.0.timestamp == $1.0.timestamp && $0.1 > $1.1) }
        return all.map(\.0)
    }

    /// Many connections open at once, their deadlines moving earlier and later past each other's
    /// with every PDU (windows short enough that deadlines fall between most PDUs), some copies at
    /// the same instant (the same deadlines): the cache and the heap stay exact after every record,
    /// and sessions whose deadlines coincide end in the order they began.
    @Test func manyOpenConnections() throws {
        let bytes = Array(
            try Data(contentsOf: capturesDirectory.appendingPathComponent("foreign/bluetoothd-gatt-server.btsnoop")))
        var reader = CaptureReader(source: ArrayByteSource(bytes))
        // (Without btmon's Delete Index at its end: the controllers' removal would end every copy's link.)
        let records = try reader.readAll().filter { $0.kind != .monitorDeleteIndex }
        // Copies 3, 4 and 5 together, 8 and 9 together; the others apart by less than a session.
        let shifts: [Int64] = [0, 7, 45, 90, 90, 90, 133, 200, 275, 275, 301, 420]
        let mix = Self.copies(records, shifts: shifts)
        var short = CuffSessionConfiguration(address: "")
        short.timeout = .milliseconds(700)
        short.settle = .milliseconds(3)
        short.storedBurstWindow = .milliseconds(2)
        short.observerStepWindow = .milliseconds(1)
        for configuration in [CuffSessionConfiguration(address: ""), short] {
            var replay = CaptureReplay(configuration: configuration)
            var out: [CaptureReplay.Output] = []
            var most = 0
            for (i, r) in mix.enumerated() {
                replay.consume(r, into: &out)
                Self.expectExact(replay, "record \(i)")
                most = max(most, replay.armed.count)
            }
            #expect(replay.connections.count == 2 * shifts.count)
            #expect(most >= shifts.count / 2, "deadlines of many connections at once")
            replay.finish(into: &out)
            var started: [String] = []
            var ended: [String] = []
            var endedByDeadline = 0
            for case let .emit(.session(s)) in out {
                if s.event == .start { started.append(s.device.address) } else { ended.append(s.device.address) }
                if s.event == .end, s.message != "the capture ends" { endedByDeadline += 1 }
            }
            #expect(started.count == shifts.count)
            #expect(Set(started).count == shifts.count)
            // The short windows end every session at its deadline, mid-capture (the default ones
            // at the end, in the order they began).
            #expect(endedByDeadline == (configuration.timeout == short.timeout ? shifts.count : 0))
            func address(_ k: Int) -> String { "00:AA:01:00:00:0" + String(k, radix: 16, uppercase: true) }
            for together in [[3, 4, 5], [8, 9]] {
                let group = Set(together.map(address))
                let begun = started.filter(group.contains)
                #expect(begun == together.reversed().map(address))
                #expect(ended.filter(group.contains) == begun)
            }
        }
    }
}
