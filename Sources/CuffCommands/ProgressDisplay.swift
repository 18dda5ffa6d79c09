// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffLogging
import CuffSession
import Logging

/// The progress display on stderr: a live gauge on a terminal, plain lines otherwise, nothing when quiet.
public final class ProgressDisplay {
    public let quiet: Bool
    let terminal: Bool
    var lastPlainElapsed = -10.0
    var lastPhase: MeasurementPhase?

    public init(quiet: Bool) {
        self.quiet = quiet
        terminal = Console.stderrIsTerminal
    }

    /// The session's lines (`cuff: …`; a line clears the gauge), none when quiet.
    public var logger: Logger { Console.logger("cuff", quiet: quiet) }

    public func log(_ s: String) {
        guard !quiet else { return }
        Console.log("cuff: " + s)
    }

    public func show(_ o: SessionOutput) {
        guard !quiet else { return }
        switch o {
        case let .progress(p):
            let value =
                p.cuffPressure.doubleValue.map {
                    p.unit == .kPa ? String(($0 * 10).rounded() / 10) : String(Int($0.rounded()))
                } ?? p.cuffPressure.description
            if terminal {
                let mmHg = p.cuffPressure.doubleValue.map { p.unit == .kPa ? $0 * PressureUnit.mmHgPerKPa : $0 } ?? 0
                let filled = max(0, min(30, Int(mmHg / 200 * 30)))
                let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: 30 - filled)
                StandardError.gauge(
                    "\r\u{1B}[2K\(p.phase.rawValue.padding(9)) \(value.leftPad(5)) \(p.unit.rawValue) \(bar) \(String(format1(p.elapsed))) s"
                )
            } else if p.phase != lastPhase || p.elapsed - lastPlainElapsed >= 2 {
                Console.log("cuff: \(p.phase.rawValue) \(value) \(p.unit.rawValue) at \(format1(p.elapsed)) s")
                lastPlainElapsed = p.elapsed
            }
            lastPhase = p.phase
        case let .measurement(m):
            clearGauge()
            let unit = m.unit.rawValue
            let pulse = m.pulseRate.map { $0.doubleValue.map { "pulse \(Int($0.rounded()))" } ?? "pulse \($0)" } ?? ""
            let when = m.timestamp.map { " at \($0)" } ?? ""
            Console.log(
                "cuff: \(m.stored ? "stored reading" : "result"): \(m.systolic)/\(m.diastolic) \(unit) \(pulse)\(when)")
            lastPhase = nil
        case let .session(s):
            clearGauge()
            if s.event == .start {
                Console.log("cuff: session with \(s.device.address)")
            }
        }
    }

    public func clearGauge() { StandardError.clearGauge() }
}

func format1(_ x: Double) -> String { String((x * 10).rounded() / 10) }

extension String {
    func padding(_ n: Int) -> String { count >= n ? self : self + String(repeating: " ", count: n - count) }
    func leftPad(_ n: Int) -> String { count >= n ? self : String(repeating: " ", count: n - count) + self }
}
