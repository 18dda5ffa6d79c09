// SPDX-License-Identifier: GPL-2.0-or-later
import Capture
import CuffSession
import Foundation
import Sinks
import Synchronization
import Testing

@testable import ReplayEngine

/// The replay engine in-process: one thread, a reader and a writer thread, and several replay
/// threads give the same bytes, warnings and counts (this target also runs under ThreadSanitizer).
@Suite struct ReplayEngineTests {
    static let captures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("captures")

    /// Every committed btsnoop capture, joined into one file (`repeats` times), as a path.
    static func joined(repeats: Int = 1, cutAt fraction: Double? = nil) throws -> String {
        let files = try FileManager.default.contentsOfDirectory(atPath: captures.path).filter {
            $0.hasSuffix(".btsnoop")
        }.sorted()
        var bytes: [UInt8] = []
        for _ in 0..<repeats {
            for f in files {
                let b = [UInt8](try Data(contentsOf: captures.appendingPathComponent(f)))
                bytes += bytes.isEmpty ? b : Array(b.dropFirst(16))
            }
        }
        if let fraction { bytes = Array(bytes.prefix(Int(Double(bytes.count) * fraction))) }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "cuff-engine-\(UUID().uuidString).btsnoop"
        ).path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    final class Collected: ReplayPresenter, @unchecked Sendable {
        let seen = Mutex<[String]>([])
        let failures = Mutex<[SinkError]>([])
        func show(_ output: CaptureReplay.Output) {
            switch output {
            case .emit: break
            case let .log(s): seen.withLock { $0.append("log " + s) }
            case let .notice(s): seen.withLock { $0.append("notice " + s) }
            case let .warning(w): seen.withLock { $0.append("warning \(w.code.rawValue) \(w.offset ?? -1)") }
            }
        }
        func sinkFailed(_ error: SinkError) { failures.withLock { $0.append(error) } }
    }

    struct Run: Equatable {
        var stdout: [UInt8]
        var shown: [String]
        var sessions: Int
        var measurements: Int
        var warnings: Int
        var fault: String?
    }

    /// Replays `path` with `threads` (and `segmentBytes`), NDJSON into a file; `direct: false`
    /// hands records through the fan-out sink (the reader-and-writer pipe path).
    static func run(
        _ path: String, threads: Int, segmentBytes: Int? = 256 * 1024, direct: Bool = true, showAll: Bool = true
    ) throws -> Run {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("cuff-engine-out-\(UUID().uuidString)")
            .path
        let fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        #expect(fd >= 0)
        defer { close(fd); unlink(out) }
        let sink = ReplayNDJSONSink(fd: fd, flushEachRecord: false)
        let sinks = ReplaySinks(fan: FanOutSink([sink]), direct: direct ? sink : nil)
        var job = ReplayJob(path: path)
        job.threads = threads
        job.segmentBytes = segmentBytes
        job.parallelMinimumBytes = 0  // the threads asked for, even on a small capture
        job.showAll = showAll
        let presenter = Collected()
        let r = try job.run(into: sinks, presenter: presenter)
        #expect(presenter.failures.withLock { $0.isEmpty })
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: out)))
        return Run(
            stdout: bytes, shown: presenter.seen.withLock { $0 }, sessions: r.sessions, measurements: r.measurements,
            warnings: r.warnings, fault: r.fault.map { "\($0.code.rawValue) \($0.offset ?? -1)" })
    }

    @Test(arguments: [nil, 0.61])
    func everyThreadingGivesTheSameReplay(cut: Double?) throws {
        let path = try Self.joined(repeats: 3, cutAt: cut)
        defer { unlink(path) }
        let one = try Self.run(path, threads: 1)
        #expect(one.measurements > 20)
        #expect(one.stdout.count > 100_000)
        if cut != nil { #expect(one.fault != nil) } else { #expect(one.fault == nil) }
        #expect(try Self.run(path, threads: 1, direct: false) == one)
        #expect(try Self.run(path, threads: 2) == one)
        #expect(try Self.run(path, threads: 3, segmentBytes: 1) == one)
        #expect(try Self.run(path, threads: 4, segmentBytes: 20_000) == one)
        #expect(try Self.run(path, threads: 2, segmentBytes: nil) == one)
        // Not shown (`--quiet`): progress records go from the replay straight into the stretch's
        // lines; the bytes, counts and fault are the same.
        let quiet = try Self.run(path, threads: 1, showAll: false)
        #expect(quiet.stdout == one.stdout && quiet.fault == one.fault && quiet.measurements == one.measurements)
        for (threads, segment) in [(2, 256 * 1024), (3, 1), (2, 4096), (4, 20_000)] {
            var parallel = try Self.run(path, threads: threads, segmentBytes: segment, showAll: false)
            #expect(parallel.stdout == one.stdout, "\(threads) threads, \(segment)")
            parallel.stdout = quiet.stdout
            #expect(parallel == quiet, "\(threads) threads, \(segment)")
        }
    }

    /// The default stretch: about 128 a thread, from 256 KB (a short capture, and the size below
    /// which one thread replays the file) to 1 MB (a long one).
    @Test func theDefaultStretchGrowsWithTheFile() {
        let kb = 1024
        #expect(ReplayJob.segmentBytes(fileSize: 0, threads: 2) == 256 * kb)
        #expect(ReplayJob.segmentBytes(fileSize: 14_800_000, threads: 2) == 256 * kb)
        #expect(ReplayJob.segmentBytes(fileSize: 100_000_000, threads: 2) == 390_625)
        #expect(ReplayJob.segmentBytes(fileSize: 100_000_000, threads: 4) == 256 * kb)
        #expect(ReplayJob.segmentBytes(fileSize: 268_435_456, threads: 2) == 1024 * kb)
        #expect(ReplayJob.segmentBytes(fileSize: 1_000_000_000, threads: 2) == 1024 * kb)
        #expect(ReplayJob.segmentBytes(fileSize: .max, threads: 64) == 1024 * kb)
        #expect(ReplayJob.segmentBytes(fileSize: 1_000_000_000, threads: 0) == 1024 * kb)
    }

    @Test func aCommittedCaptureGivesItsCommittedNDJSON() throws {
        // The engine's bytes are the ones captures/*.ndjson hold (received_at and all).
        for name in ["normal", "stored-records", "slow-confirm"] {
            let run = try Self.run(Self.captures.appendingPathComponent("\(name).btsnoop").path, threads: 2)
            let expected = [UInt8](try Data(contentsOf: Self.captures.appendingPathComponent("\(name).ndjson")))
            #expect(run.stdout == expected, "\(name)")
        }
    }

    @Test func aFailingSinkStopsTheReplayAndIsReported() throws {
        let path = try Self.joined()
        defer { unlink(path) }
        for threads in [1, 3] {
            let full = open("/dev/full", O_WRONLY | O_CLOEXEC)
            defer { close(full) }
            let sink = ReplayNDJSONSink(fd: full, flushEachRecord: false)
            var job = ReplayJob(path: path)
            job.threads = threads
            job.segmentBytes = 1
            job.parallelMinimumBytes = 0
            let presenter = Collected()
            let r = try job.run(into: ReplaySinks(fan: FanOutSink([sink]), direct: sink), presenter: presenter)
            #expect(r.sinkFailed)
            #expect(presenter.failures.withLock { $0.count } == 1)
            #expect(presenter.failures.withLock { $0.first?.description.contains("No space left on device") } == true)
        }
    }
}

extension ReplayEngineTests {
    /// One cuff that reconnects without discovery (bonded, with a GATT cache) seven times after
    /// each session with discovery: each stretch's replay starts from a map an earlier discovery
    /// left, which later discoveries of the same handles replace before the stretch is written.
    @Test func reconnectsAfterRediscoveriesAreNotReplayedAgain() throws {
        let discovery: Set<UInt8> = [0x04, 0x05, 0x10, 0x11]
        let reconnect = BigCapture.bloodPressureSession.filter { !discovery.contains($0.pdu[0]) }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "cuff-engine-\(UUID().uuidString).btsnoop"
        ).path
        defer { unlink(path) }
        _ = try BigCapture.write(
            path: path, minimumBytes: 400_000,
            sessions: [BigCapture.bloodPressureSession] + Array(repeating: reconnect, count: 7))
        let one = try Self.run(path, threads: 1)
        let notices = one.shown.filter { $0.hasPrefix("notice ") && $0.contains("using the handles discovered") }
        #expect(notices.count > 100)
        #expect(Set(notices).count > 20, "the notices name many discoveries")
        #expect(try Self.run(path, threads: 2, segmentBytes: 4096) == one)

        var configuration = CuffSessionConfiguration(address: "")
        configuration.timeout = .seconds(300)
        let parallel = ParallelReplay(
            path: path, datalink: .monitor, configuration: configuration, adapter: nil, overrides: [:],
            showAll: true, threads: 2, segmentBytes: 4096)
        let outcome = parallel.run(from: 16) { _ in true }
        #expect(outcome.resumeAt == nil, "the threads replayed the whole capture")
        #expect(parallel.written > 50)
        // Only the stretches handed out before the first discovery was written (they lacked its map).
        #expect(parallel.replayedAgain <= parallel.maximumInFlight)
    }
}

extension ReplayEngineTests {
    /// A connection that never closes, after a part that cuts: the threads write the stretches
    /// before it, end to end, and the one-thread replay goes on from where the last one ends,
    /// before the connection; the output is the one-thread replay's.
    @Test func aCaptureThatStopsCuttingGoesToOneThreadFromTheLastCut() throws {
        let joinedPath = try Self.joined(repeats: 1)
        defer { unlink(joinedPath) }
        let joined = [UInt8](try Data(contentsOf: URL(fileURLWithPath: joinedPath)))
        let records = Array(joined.dropFirst(16))
        // An ATT Read Request on handle 0x0EEE, which no event opens or closes: no quiet point
        // comes after it.
        var acl: [UInt8] = [0, 0, 0, 11, 0, 0, 0, 11, 0, 0, 0, 4, 0, 0, 0, 0] + records[16..<24]
        acl += [0xEE, 0x2E, 7, 0, 3, 0, 4, 0, 0x0A, 3, 0]
        var bytes = Array(joined.prefix(16)) + records + records
        let openAt = bytes.count
        bytes += acl
        while bytes.count < openAt + 3 << 20 { bytes += records }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "cuff-engine-open-\(UUID().uuidString).btsnoop"
        ).path
        defer { unlink(path) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))

        let one = try Self.run(path, threads: 1)
        #expect(try Self.run(path, threads: 2, segmentBytes: 4096) == one)

        var configuration = CuffSessionConfiguration(address: "")
        configuration.timeout = .seconds(300)
        let parallel = ParallelReplay(
            path: path, datalink: .monitor, configuration: configuration, adapter: nil, overrides: [:],
            showAll: true, threads: 2, segmentBytes: 4096)
        var writtenTo: Int64 = 16
        let outcome = parallel.run(from: 16) { r in
            #expect(r.offset == writtenTo, "stretches are written in order, end to end")
            writtenTo = r.offset + Int64(r.bytes.count)
            return true
        }
        let resume = try #require(outcome.resumeAt)
        #expect(resume == writtenTo, "the one-thread replay starts where the last written stretch ends")
        #expect(resume <= Int64(openAt) && resume > Int64(openAt) - 2 * 4096 - 64 * 1024)
        #expect(parallel.written > 10)
    }
}

extension ReplayEngineTests {
    /// The look before the threads start: a quiet point at least a stretch in, within the distance
    /// the parallel replay reads before it gives up, or none (the file goes to one thread at once).
    @Test func theParallelReplayStartsOnlyWhereTheFileCutsEarly() throws {
        let joinedPath = try Self.joined(repeats: 2)
        defer { unlink(joinedPath) }
        let joined = [UInt8](try Data(contentsOf: URL(fileURLWithPath: joinedPath)))
        #expect(ParallelReplay.cutsEarly(path: joinedPath, offset: 16, datalink: .monitor, segmentBytes: 4096))
        // No stretch of a whole file: nothing to share.
        #expect(
            !ParallelReplay.cutsEarly(path: joinedPath, offset: 16, datalink: .monitor, segmentBytes: joined.count))

        // A connection open from the first record on (an ATT request on a handle no event opens or
        // closes): no quiet point at all, however long the file.
        let records = Array(joined.dropFirst(16))
        var acl: [UInt8] = [0, 0, 0, 11, 0, 0, 0, 11, 0, 0, 0, 4, 0, 0, 0, 0] + records[16..<24]
        acl += [0xEE, 0x2E, 7, 0, 3, 0, 4, 0, 0x0A, 3, 0]
        var open = Array(joined.prefix(16)) + acl
        while open.count < 3 << 20 { open += records }
        let openPath = FileManager.default.temporaryDirectory.appendingPathComponent(
            "cuff-engine-open-\(UUID().uuidString).btsnoop"
        ).path
        defer { unlink(openPath) }
        try Data(open).write(to: URL(fileURLWithPath: openPath))
        #expect(!ParallelReplay.cutsEarly(path: openPath, offset: 16, datalink: .monitor, segmentBytes: 4096))
        // The same records from after the open one: they cut.
        #expect(
            ParallelReplay.cutsEarly(
                path: openPath, offset: 16 + Int64(acl.count), datalink: .monitor, segmentBytes: 4096))
        // And its replay is still the one-thread replay's.
        #expect(try Self.run(openPath, threads: 2, segmentBytes: 4096) == Self.run(openPath, threads: 1))

        // A record header no reader gets past, or a file that is not there: no.
        var stop =
            Array(joined.prefix(16)) + [0, 0xFF, 0xFF, 0xFF, 0, 0xFF, 0xFF, 0xFF] + [UInt8](repeating: 0, count: 16)
        stop += records
        let stopPath = openPath + ".stop"
        defer { unlink(stopPath) }
        try Data(stop).write(to: URL(fileURLWithPath: stopPath))
        #expect(!ParallelReplay.cutsEarly(path: stopPath, offset: 16, datalink: .monitor, segmentBytes: 1))
        #expect(!ParallelReplay.cutsEarly(path: stopPath + ".none", offset: 16, datalink: .monitor, segmentBytes: 1))
    }
}
