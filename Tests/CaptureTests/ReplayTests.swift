// SPDX-License-Identifier: GPL-2.0-or-later

import BloodPressure
import Capture
import CuffCore
import CuffSession
import Foundation
import GATT
import Testing

/// The repository's `captures/` folder.
let capturesDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("captures")

/// Every committed capture's name (without extension).
func committedCaptures() -> [String] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: capturesDirectory.path)) ?? []
    return names.filter { $0.hasSuffix(".btsnoop") }.map { String($0.dropLast(".btsnoop".count)) }.sorted()
}

/// Replays `records` in-process; returns the NDJSON lines, the logs and the replay.
func replay(_ records: [HCIRecord], adapter: UInt16? = nil, overrides: [UInt16: CuffCharacteristic] = [:])
    -> (lines: [String], outputs: [SessionOutput], replay: CaptureReplay)
{
    var r = CaptureReplay(adapter: adapter, overrides: overrides)
    var out: [CaptureReplay.Output] = []
    for rec in records { r.consume(rec, into: &out) }
    r.finish(into: &out)
    let emitted = out.compactMap { o -> SessionOutput? in if case let .emit(e) = o { return e } else { return nil } }
    return (emitted.map { $0.json.serialized() }, emitted, r)
}

func replayFile(_ path: String, adapter: UInt16? = nil, overrides: [UInt16: CuffCharacteristic] = [:]) throws
    -> (lines: [String], outputs: [SessionOutput], replay: CaptureReplay)
{
    var reader = try CaptureReader(path: path)
    return replay(try reader.readAll(), adapter: adapter, overrides: overrides)
}

@Suite("Capture replay")
struct ReplayTests {
    @Test func committedCapturesExist() {
        // One per simulator scenario (15) plus the BPS 1.1 stored-records session.
        #expect(committedCaptures().count >= 16)
    }

    @Test(arguments: committedCaptures())
    func committedCaptureReplaysToItsNDJSON(_ name: String) throws {
        let expected = try String(
            contentsOf: capturesDirectory.appendingPathComponent(name + ".ndjson"), encoding: .utf8
        )
        .split(separator: "\n").map(String.init)
        let got = try replayFile(capturesDirectory.appendingPathComponent(name + ".btsnoop").path)
        #expect(got.lines.count == expected.count)
        for (i, (a, b)) in zip(got.lines, expected).enumerated() where a != b {
            Issue.record("\(name): line \(i + 1) differs:\n got \(a)\n want \(b)")
            break
        }
        #expect(got.replay.sessions == 1)
    }

    /// The end record's att_requests is what the capture shows the central sending: counted here
    /// from the ATT PDUs the local host (the central, in these captures) sent with a request opcode.
    @Test(arguments: committedCaptures())
    func endRecordCountsTheCentralsRequests(_ name: String) throws {
        let path = capturesDirectory.appendingPathComponent(name + ".btsnoop").path
        var reader = try CaptureEventReader(path: path)
        var requests = 0
        while let e = try reader.next() {
            guard let p = e.att, p.direction == .fromLocal, let op = p.pdu.first else { continue }
            if ATTOpcode(rawValue: op).isRequest { requests += 1 }
        }
        let end = try #require(try replayFile(path).lines.last)
        #expect(end.contains("\"att_requests\":\(requests),"), "\(name): \(requests) requests; \(end)")
        #expect(requests > 0 && end.contains("\"gatt_cache\":null"))
    }

    @Test func sharedVMSampleNeedsAHandleMapAndSaysWhich() throws {
        guard FileManager.default.fileExists(atPath: sharedSample) else { return }
        let r = try replayFile(sharedSample)
        // hci1 is the central of 8 connections (6 carried an indication); hci0, the peripheral, is not reported.
        #expect(r.replay.sessions == 8)
        #expect(r.replay.measurements == 0)
        #expect(r.replay.unmapped.count == 6)
        #expect(
            r.replay.unmapped.allSatisfy {
                $0.adapter == 1 && $0.handles.keys.sorted() == [0x0003] && $0.handles[0x0003]!.indications == 1
            })
    }

    @Test func sharedVMSampleWithHandleMapGivesOneMeasurementPerCentralSession() throws {
        guard FileManager.default.fileExists(atPath: sharedSample) else { return }
        let r = try replayFile(sharedSample, overrides: [0x0003: .bloodPressureMeasurement])
        #expect(r.replay.sessions == 8)
        #expect(r.replay.measurements == 6)
        #expect(r.replay.unmapped.isEmpty)
        let ms = r.outputs.compactMap { o -> MeasurementRecord? in
            if case let .measurement(m) = o { return m } else { return nil }
        }
        #expect(ms.count == 6)
        for m in ms {
            // 00 78 00 50 00 5d 00: 120/80 mmHg, MAP 93, as results-all-scenarios.jsonl says.
            #expect(m.systolic.doubleValue == 120)
            #expect(m.diastolic.doubleValue == 80)
            #expect(m.meanArterialPressure.doubleValue == 93)
            #expect(m.raw == [0x00, 0x78, 0x00, 0x50, 0x00, 0x5D, 0x00])
            // The peer of hci1 is hci0's address.
            #expect(m.device.address == "00:AA:01:00:00:00")
        }
        let ends = r.outputs.compactMap { o -> SessionRecord? in
            if case let .session(s) = o, s.event == .end { return s } else { return nil }
        }
        #expect(ends.count == 8)
        #expect(ends.filter { $0.outcome == .completed }.count == 6)
        // Only the peripheral controller: nothing to report.
        let peripheralOnly = try replayFile(sharedSample, adapter: 0, overrides: [0x0003: .bloodPressureMeasurement])
        #expect(peripheralOnly.replay.sessions == 0)
        #expect(peripheralOnly.lines.isEmpty)
        let centralOnly = try replayFile(sharedSample, adapter: 1, overrides: [0x0003: .bloodPressureMeasurement])
        #expect(centralOnly.lines == r.lines)
    }

    @Test func captureStartingMidConnectionInfersTheCentralFromRequests() throws {
        var reader = try CaptureReader(path: capturesDirectory.appendingPathComponent("normal.btsnoop").path)
        let all = try reader.readAll()
        let full = replay(all)
        // Drop the LE Enhanced Connection Complete: the replay must decide from who sends requests.
        let cut = all.filter { !($0.kind == .event && $0.payload.first == 0x3E) }
        let r = replay(cut)
        #expect(r.replay.sessions == 1)
        let measurements = { (o: [SessionOutput]) in
            o.compactMap { x -> String? in if case .measurement = x { return x.json.serialized() } else { return nil } }
        }
        let strip = { (s: String) in
            s.replacingOccurrences(of: #""address":"[^"]*""#, with: "", options: .regularExpression)
        }
        #expect(measurements(r.outputs).map(strip) == measurements(full.outputs).map(strip))
        #expect(measurements(r.outputs).count == 1)
    }

    @Test func sessionsOnSeveralConnectionsAndControllersAreKeptApart() throws {
        var a = try CaptureReader(path: capturesDirectory.appendingPathComponent("normal.btsnoop").path)
        var b = try CaptureReader(path: capturesDirectory.appendingPathComponent("hypertensive.btsnoop").path)
        let ra = try a.readAll(), rb = try b.readAll()
        // Shift b onto a's start, onto controller 3 and connection handle 0x0041, and interleave by time.
        let shift = ra[0].timestamp.nanoseconds - rb[0].timestamp.nanoseconds + 3_000_000
        let moved = rb.map { r -> HCIRecord in
            var r = r
            r.timestamp = Timestamp(nanoseconds: r.timestamp.nanoseconds + shift)
            r.adapterIndex = 3
            if r.kind == .aclData { r.payload[0] = (r.payload[0] & 0x00) | 0x41 }
            if r.kind == .event, r.payload.first == 0x3E { r.payload[4] = 0x41 }
            if r.kind == .event, r.payload.first == 0x05 { r.payload[3] = 0x41 }
            if r.kind == .event, r.payload.first == 0x13 { r.payload[3] = 0x41 }
            return r
        }
        let merged = (ra + moved).enumerated().sorted {
            ($0.element.timestamp, $0.offset) < ($1.element.timestamp, $1.offset)
        }.map(\.element)
        let both = replay(merged)
        #expect(both.replay.sessions == 2)
        let sa = replay(ra), sb = replay(moved)
        let sys = { (o: [SessionOutput]) in
            o.compactMap { x -> Double? in
                if case let .measurement(m) = x { return m.systolic.doubleValue } else { return nil }
            }
        }
        #expect(Set(sys(both.outputs)) == Set(sys(sa.outputs) + sys(sb.outputs)))
        // Each session's records, in order, are exactly those of its capture alone.
        let progressA = sa.lines.filter { $0.contains("\"progress\"") }
        let progressB = sb.lines.filter { $0.contains("\"progress\"") }
        let progressBoth = both.lines.filter { $0.contains("\"progress\"") }
        #expect(progressBoth.count == progressA.count + progressB.count)
        #expect(Set(progressBoth) == Set(progressA + progressB))
        #expect(Set(both.lines) == Set(sa.lines + sb.lines))
    }

    @Test func aLostFragmentIsReportedAndTheSessionStillDecodes() throws {
        var reader = try CaptureReader(path: capturesDirectory.appendingPathComponent("normal.btsnoop").path)
        var records = try reader.readAll()
        // Drop the first start fragment of a multi-fragment frame (a discovery response): its
        // continuations arrive with no frame pending.
        let i = try #require(
            records.firstIndex { r in
                guard r.kind == .aclData, r.payload.count >= 8 else { return false }
                let pb = r.payload[1] >> 4 & 3
                let aclLength = Int(r.payload[2]) | Int(r.payload[3]) << 8
                let l2capLength = Int(r.payload[4]) | Int(r.payload[5]) << 8
                return (pb == 0 || pb == 2) && l2capLength + 4 > aclLength
            })
        let lostOffset = records[i + 1].fileOffset
        records.remove(at: i)
        var r = CaptureReplay()
        var out: [CaptureReplay.Output] = []
        for rec in records { r.consume(rec, into: &out) }
        r.finish(into: &out)
        let warnings = out.compactMap { o -> CaptureError? in
            if case let .warning(w) = o { return w } else { return nil }
        }
        #expect(warnings.first?.code == .aclOutOfOrder)
        #expect(warnings.first?.offset == lostOffset)
        #expect(r.measurements == 1)
    }

    @Test func truncatedCaptureKeepsTheRecordsBeforeTheCut() throws {
        let bytes = try [UInt8](Data(contentsOf: capturesDirectory.appendingPathComponent("normal.btsnoop")))
        let cut = Array(bytes.prefix(bytes.count / 2 + 7))
        let (records, error) = readAll(cut)
        let e = try #require(error)
        #expect(e.code == .truncatedRecord || e.code == .truncatedHeader)
        #expect(e.offset != nil)
        let r = replay(records)
        #expect(r.lines.first?.contains("\"start\"") == true)
        #expect(r.lines.filter { $0.contains("\"progress\"") }.count > 50)
        #expect(r.lines.last?.contains("\"end\"") == true)
    }
}

@Suite("Session machine observer mode")
struct ObserverModeTests {
    static let profile = CuffProfile(
        hasBloodPressureService: true,
        characteristics: [
            .bloodPressureMeasurement: .indicate, .intermediateCuffPressure: .notify, .bloodPressureFeature: .read,
            .manufacturerName: .read, .modelNumber: .read, .currentTime: [.read, .write],
        ])

    static func at(_ s: Double) -> EventTime {
        EventTime(monotonic: .seconds(s), wallMicros: 1_790_000_000_000_000 + Int64(s * 1e6))
    }

    static func machine(observer: Bool) -> CuffSessionMachine {
        var c = CuffSessionConfiguration(address: "t")
        c.observer = observer
        var m = CuffSessionMachine(configuration: c)
        _ = m.handle(.start(at(0)))
        _ = m.handle(.connected(at(0)))
        _ = m.handle(.discovered(profile, at(0.1)))
        return m
    }

    @Test func liveMachineIgnoresReadsOutOfItsPlan() {
        var m = Self.machine(observer: false)
        // The plan reads the Feature first; a model read now is not what it asked for.
        _ = m.handle(.readCompleted(.modelNumber, Array("BM85".utf8), Self.at(0.2)))
        #expect(m.device.model == nil)
        #expect(m.state == .configuring)
    }

    @Test func observerTakesReadsInAnyOrderAndSkipsStepsTheClientDidNotMake() {
        var m = Self.machine(observer: true)
        // The observed client reads the model (selecting the quirk profile), skips the rest, subscribes to the BPM only.
        let a = m.handle(.readCompleted(.modelNumber, Array("BM85".utf8), Self.at(0.2)))
        #expect(m.device.model == "BM85")
        #expect(a.contains(.log("applying quirk profile beurer-bm85 for BM85")))
        _ = m.handle(.readCompleted(.manufacturerName, Array("Beurer".utf8), Self.at(0.25)))
        #expect(m.device.manufacturer == "Beurer")
        _ = m.handle(.subscribed(.bloodPressureMeasurement, Self.at(0.3)))
        #expect(m.state == .ready)
        // A live result (after cuff pressure) is emitted and decoded with the quirk.
        _ = m.handle(
            .notification(
                .intermediateCuffPressure, BloodPressureMeasurement.cuffPressure(SFloat(100.0)).encode(), Self.at(1)))
        let r = m.handle(
            .indication(
                .bloodPressureMeasurement,
                [
                    0x16, 0x77, 0x00, 0x50, 0x00, 0x5D, 0x00, 0xEA, 0x07, 0x0B, 0x16, 0x08, 0x0E, 0x02, 0x00, 0x4A,
                    0x01, 0x00, 0x01,
                ], Self.at(2)))
        let ms = r.compactMap { x -> MeasurementRecord? in
            if case let .emit(.measurement(mr)) = x { return mr } else { return nil }
        }
        #expect(ms.count == 1)
        #expect(ms.first?.stored == false)
        #expect(ms.first?.pulseRate?.doubleValue == 74)
    }

    @Test func observerGivesUpAPlanTheClientNeverFollows() {
        var m = Self.machine(observer: true)
        #expect(m.state == .configuring)
        // Nothing observed: the step window passes and the machine is ready, not stuck.
        let d = m.nextDeadline!
        _ = m.handle(.tick(EventTime(monotonic: d, wallMicros: 0)))
        #expect(m.state == .ready)
        // A stored-record request written out of the plan still starts a report.
        _ = m.handle(.writeCompleted(.recordAccessControlPoint, Self.at(3)))
        #expect(m.state == .receivingStoredRecords)
    }

    @Test func observerFollowingTheWholePlanMatchesTheLiveMachine() {
        var live = Self.machine(observer: false), obs = Self.machine(observer: true)
        var t = 0.2
        let steps: [CuffSessionMachine.Event] = [
            .readCompleted(.bloodPressureFeature, [0x3F, 0], Self.at(t)),
            .readCompleted(.manufacturerName, Array("X".utf8), Self.at(t + 0.1)),
            .readCompleted(.modelNumber, Array("Y".utf8), Self.at(t + 0.2)),
            .writeCompleted(.currentTime, Self.at(t + 0.3)),
            .subscribed(.intermediateCuffPressure, Self.at(t + 0.4)),
            .subscribed(.bloodPressureMeasurement, Self.at(t + 0.5)),
        ]
        for e in steps {
            let a = live.handle(e).filter { if case .emit = $0 { true } else { false } }
            let b = obs.handle(e).filter { if case .emit = $0 { true } else { false } }
            #expect(a == b)
            #expect(live.state == obs.state)
        }
        t = 1
        #expect(live.device == obs.device)
        #expect(live.state == .ready)
        _ = t
    }
}
