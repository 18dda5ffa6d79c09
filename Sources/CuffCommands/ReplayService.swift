// SPDX-License-Identifier: GPL-2.0-or-later
import Capture
import CuffCore
import CuffLogging
import Logging
import ReplayEngine
import Sinks

/// `cuff replay`: a capture replayed into the sinks, the progress display and the hints on
/// stderr. Returns normally with at least one measurement and no fault; else throws the status
/// the README gives (1 damaged, 2 no measurement, 7 unmapped handles, 10/141 a sink failed).
public enum ReplayService {
    static var log: Logger { Console.logger("cuff replay") }

    /// `makeSinks` opens the sinks (a failure there is a failed sink).
    public static func run(_ job: ReplayJob, quiet: Bool, makeSinks: () throws -> ReplaySinks) throws {
        let display = ProgressDisplay(quiet: quiet)
        let sinks: ReplaySinks
        do { sinks = try makeSinks() } catch { throw Console.sinkFailed("cuff replay", error) }
        let result: ReplayResult
        let presenter = ReplayDisplay(display: display, file: job.path)
        do {
            result = try job.run(into: sinks, presenter: presenter)
        } catch {
            presenter.sayHiddenWarnings()
            log.info("\(error.message)")
            throw ExitStatus.failure
        }
        presenter.sayHiddenWarnings()
        display.clearGauge()
        // One hint per controller and set of handles, however many connections showed it.
        for hint in UnmappedHint.group(result.unmapped) {
            for line in hint.lines(file: job.path) { log.info("\(line)") }
        }
        if let fault = result.fault { log.info("\(job.path): \(fault.summary)") }
        let (sessions, measurements) = (result.sessions, result.measurements)
        if !quiet {
            log.info(
                "\(sessions) session\(sessions == 1 ? "" : "s"), \(measurements) measurement\(measurements == 1 ? "" : "s")"
            )
        }
        if result.sinkFailed { throw Console.sinkFailureStatus }
        if result.fault != nil || result.warnings > 0 { throw ExitStatus.failure }
        if !result.unmapped.isEmpty { throw ExitStatus.serviceMissing }
        if measurements == 0 { throw ExitStatus.noResult }
    }

}

/// `cuff replay`'s stderr: records on the progress display, log lines, notices and warnings.
final class ReplayDisplay: ReplayPresenter, @unchecked Sendable {
    let display: ProgressDisplay
    let file: String

    init(display: ProgressDisplay, file: String) {
        self.display = display
        self.file = file
    }

    /// Quiet (no gauge, no progress lines): the notice and warning lines, escaped, kept for
    /// ``flush()`` and written many at once. A short-session capture has a notice per session:
    /// one write each was about a quarter of the replay's system time. (Kept as bytes: appending
    /// each line to a String cost about 1,300 instructions a line under callgrind, on the thread
    /// that also reads the file and writes the stretches.)
    private var pending: [UInt8] = []

    func show(_ o: CaptureReplay.Output) {
        switch o {
        case let .emit(e): display.show(e)
        case let .log(s): display.log(s)
        case let .notice(s):
            // (The prefix has no control character: escaping the notice alone escapes the line.)
            if display.quiet { return keep(prefix: "cuff replay: ", s) }
            display.clearGauge()
            Console.log("cuff replay: \(s)")
        case let .warning(w):
            let shown = warningsByCode[w.code, default: 0] + 1
            warningsByCode[w.code] = shown
            guard shown <= Self.warningsShownPerCode else { return }
            let line = "cuff replay: \(file): \(w.summary)"
            if display.quiet { return keep(prefix: "", line) }
            Console.log(line)
        }
    }

    /// Warnings shown of one code: past these, they are counted and said once at the end (probe
    /// C3: one overlong L2CAP frame was followed by 2,400 `acl_out_of_order` lines, one for each
    /// continuation fragment after it). Each still counts for the exit status.
    static let warningsShownPerCode = 10
    private var warningsByCode: [CaptureError.Code: Int] = [:]

    /// Says how many warnings of each code went unshown (then flushes what is kept).
    func sayHiddenWarnings() {
        for (code, count) in warningsByCode.sorted(by: { $0.key.rawValue < $1.key.rawValue })
        where count > Self.warningsShownPerCode {
            let line =
                "cuff replay: \(file): \(count - Self.warningsShownPerCode) more \(code.rawValue) warnings not shown (the first \(Self.warningsShownPerCode) are above)"
            if display.quiet { keep(prefix: "", line) } else { Console.log(line) }
        }
        warningsByCode = [:]
        flush()
    }

    private func keep(prefix: StaticString, _ text: String) {
        pending.append(contentsOf: UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount))
        var line = TerminalText.escapingControlCharacters(text)
        line.withUTF8 { pending.append(contentsOf: $0) }
        pending.append(0x0A)
        if pending.count >= 16 * 1024 { flush() }
    }

    func flush() {
        guard !pending.isEmpty else { return }
        pending.withUnsafeBytes { StandardError.escapedLines(bytes: $0) }
        pending.removeAll(keepingCapacity: true)
    }

    func sinkFailed(_ error: SinkError) {
        flush()
        _ = Console.sinkFailed("cuff replay", error)
    }
}
