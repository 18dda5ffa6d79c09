// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import Capture
import CuffCore
import CuffSession
import Sinks
import Transport

#if canImport(Glibc)
    import Glibc
#endif

/// What a replay shows besides the records it writes: it gets every output in order (records for a
/// progress display, log lines, notices, warnings) and a sink's failure. Called from one thread at
/// a time, not always the one that started the replay.
public protocol ReplayPresenter: AnyObject, Sendable {
    func show(_ output: CaptureReplay.Output)
    func sinkFailed(_ error: SinkError)
    /// Writes out what ``show(_:)`` kept back, if it keeps any: called after each batch of
    /// outputs and before the replay returns.
    func flush()
}

extension ReplayPresenter {
    public func flush() {}
}

/// Where a replay's records go: the sinks, and (when stdout's NDJSON is the only one) that sink
/// called directly, which lets a btsnoop file be replayed on several threads.
public struct ReplaySinks: Sendable {
    public let fan: FanOutSink
    public let direct: ReplayNDJSONSink?

    public init(fan: FanOutSink, direct: ReplayNDJSONSink?) {
        self.fan = fan
        self.direct = direct
    }
}

/// One `cuff replay` of a file: what to read and how.
public struct ReplayJob: Sendable {
    public var path: String
    public var format: CaptureFormat = .auto
    /// Only this controller (hciN index), or all.
    public var adapter: UInt16?
    /// `--handle`: value handles mapped by hand (they win over discovered ones).
    public var overrides: [UInt16: CuffCharacteristic] = [:]
    /// Pace the records by their timestamps (one thread, every record written at once).
    public var realtime = false
    /// Replay threads for a btsnoop file (1: one; the output is the same).
    public var threads = ReplayJob.defaultThreads
    /// The smallest stretch of a btsnoop file handed to a replay thread; nil: chosen from the
    /// file's size (``segmentBytes(fileSize:threads:)``).
    public var segmentBytes: Int?
    /// A btsnoop file smaller than this is replayed on one thread whatever ``threads`` says (nil:
    /// ``threads`` × ``minimumSegmentBytes`` × 8, where the stretches start to outweigh the threads' cost).
    /// `cuff replay --jobs N` sets 0: the threads asked for.
    public var parallelMinimumBytes: Int?
    /// Hand the presenter records and log lines too (not only notices and warnings).
    public var showAll = true
    public var configuration: CuffSessionConfiguration

    public init(path: String) {
        self.path = path
        configuration = CuffSessionConfiguration(address: "")
        configuration.timeout = .seconds(300)
    }

    /// One replay thread per CPU, at most 4 (beyond that the writer and the disk set the pace);
    /// one on a single CPU. On 2 CPUs two threads beat the one-thread replay's reader and writer
    /// pair once stretches are no longer replayed twice (2 cores: 1 GB of the default shape 1.39 s
    /// against 1.75 s, 20,000 short sessions 0.10 s against 0.13 s); a capture that does not cut
    /// (connections never closed) goes to one thread after its first megabyte.
    public static var defaultThreads: Int { Sys.onlineProcessors <= 1 ? 1 : min(4, Sys.onlineProcessors) }

    /// The default stretch: as long as gives each thread about 128 of them, from 256 KB to 1 MB.
    public static let minimumSegmentBytes = 256 * 1024
    public static let maximumSegmentBytes = 1024 * 1024
    /// The largest stretch `--segment-bytes` takes (a larger one is taken as this): each replay
    /// thread keeps a buffer of three times it, and stretches this long leave two threads little to
    /// share on any capture below a few hundred MB.
    public static let largestSegmentBytes = 1 << 24

    /// Longer stretches mean fewer hand-overs between this thread and the replay threads, each of
    /// which can wake a sleeping thread (a futex call and, in a VM, a cross-CPU interrupt): on
    /// 1 GB, 1 MB stretches made 2,600 context switches where 256 KB made 9,300, and the median
    /// of 15 runs went from 1.51 s to 1.35 s. Each thread still gets enough stretches that the
    /// last one is a small share of its work; peak memory grows with them (36 MB to 49 MB at 1 MB).
    public static func segmentBytes(fileSize: Int64, threads: Int) -> Int {
        let share = fileSize / Int64(max(threads, 1) * 128)
        return Int(min(max(share, Int64(minimumSegmentBytes)), Int64(maximumSegmentBytes)))
    }
}

/// What a replay came to.
public struct ReplayResult: Sendable {
    public var sessions = 0
    public var measurements = 0
    /// Connections whose values came on handles nothing mapped.
    public var unmapped: [CaptureReplay.Unmapped] = []
    /// The capture's damage that ended the replay (the records before it were written).
    public var fault: CaptureError?
    /// Recoverable damage the replay went past (each was shown).
    public var warnings = 0
    /// A sink failed (the failure was shown); the replay stopped there.
    public var sinkFailed = false
}

extension ReplayJob {
    /// Replays the capture into `sinks` (finished before it returns), showing what `presenter`
    /// wants to show. A capture that cannot be opened is a ``CaptureError``.
    ///
    /// Without pacing, a second thread serialises and writes the outputs while this one reads and
    /// decodes, batch by batch, in order; a regular btsnoop file with only stdout's NDJSON is cut
    /// where no connection is open and replayed on ``threads`` threads (``ParallelReplay``), with
    /// the same output. With ``realtime`` every record goes out at once, at its capture's pace.
    public func run(into sinks: ReplaySinks, presenter: ReplayPresenter) throws(CaptureError) -> ReplayResult {
        var reader = try CaptureReader(path: path, format: format)
        let drain = ReplayDrain(presenter: presenter, sinks: sinks, showsRecords: showAll)
        // Log lines nobody is shown are not made.
        var configuration = self.configuration
        if !showAll { configuration.logs = false }
        var result = ReplayResult()

        func sequential(
            _ reader: inout CaptureReader<FileByteSource>, learned: [CaptureReplay.Peer: DiscoveredHandles] = [:]
        ) {
            var replay = CaptureReplay(
                configuration: configuration, adapter: adapter, overrides: overrides, learned: learned)
            var out: [CaptureReplay.Output] = []
            out.reserveCapacity(ReplayOutputPipe.batchSize + 64)
            let pacer = realtime ? Pacer() : nil
            let pipe = realtime ? nil : ReplayOutputPipe(drain)
            func deliver(_ out: inout [CaptureReplay.Output], force: Bool) -> Bool {
                if let pipe {
                    guard out.count >= ReplayOutputPipe.batchSize || (force && !out.isEmpty) else { return true }
                    pipe.send(&out)
                    return !pipe.failed
                }
                let ok = drain.drain(out)
                out.removeAll(keepingCapacity: true)
                return ok
            }
            let ending = replay.replay(
                &reader, into: &out, before: pacer.map { p in { p.wait(until: $0.timestamp) } },
                batch: pipe == nil ? 1 : ReplayOutputPipe.batchSize, deliver: { deliver(&$0, force: false) })
            if case let .fault(e) = ending { result.fault = e }
            if !(pipe?.failed ?? drain.sinkFailed) {
                replay.finish(after: result.fault, into: &out)
                _ = deliver(&out, force: true)
            }
            pipe?.close()
            result.sessions += replay.sessions
            result.measurements += replay.measurements
            result.unmapped += replay.unmapped
        }

        var headerFault: CaptureError?
        do { try reader.readHeader() } catch { headerFault = error }
        if let headerFault {
            result.fault = headerFault
        } else if let direct = sinks.direct, threads > 1, !realtime, reader.format == .btsnoop,
            let size = Self.regularFileSize(path),
            size >= Int64(parallelMinimumBytes ?? threads * Self.minimumSegmentBytes * 8),
            let datalink = reader.datalink.flatMap(BTSnoopDatalink.init(rawValue:)),
            case let stretch = segmentBytes ?? Self.segmentBytes(fileSize: size, threads: threads),
            // (A file that does not cut where the first stretch would end goes to one thread at
            // once: the parallel replay would give up there.)
            ParallelReplay.cutsEarly(path: path, offset: reader.offset, datalink: datalink, segmentBytes: stretch)
        {
            let parallel = ParallelReplay(
                path: path, datalink: datalink, configuration: configuration, adapter: adapter,
                overrides: overrides, showAll: showAll, threads: threads, segmentBytes: stretch)
            if parallel.started {
                let o = parallel.run(from: reader.offset) { r in
                    drain.show(r.shown)
                    return drain.write(serialized: r.ndjson.bytes, to: direct)
                }
                result.sessions = o.sessions
                result.measurements = o.measurements
                result.unmapped = o.unmapped
                result.fault = o.fault
                if let resume = o.resumeAt {
                    do {
                        var rest = CaptureReader(
                            btsnoopRecords: try FileByteSource(path: path, offset: resume), datalink: datalink,
                            offset: resume)
                        sequential(&rest, learned: o.learned)
                    } catch {
                        result.fault = error
                    }
                }
            } else {
                sequential(&reader)
            }
        } else {
            sequential(&reader)
        }
        presenter.flush()
        result.sinkFailed = drain.sinkFailed
        result.warnings = drain.warnings
        do { try sinks.fan.finish() } catch {
            if !result.sinkFailed { presenter.sinkFailed(error) }
            result.sinkFailed = true
        }
        return result
    }

    /// The size of a regular file (one that can be read again from an offset), nil for a pipe or a device.
    static func regularFileSize(_ path: String) -> Int64? {
        guard case .success(let st) = Sys.fileStatus(path), (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(st.st_size)
    }
}
