// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import Logging
import Synchronization
import Transport

/// stderr, the humans' channel: whole lines with their control characters escaped, the live
/// gauge of `cuff measure` (a line of its own, cleared before any other line), and silence once
/// stdout's reader went away (`cuff replay BIG | head -1` says nothing more).
public enum StandardError {
    struct State {
        var gaugeShown = false
        var readerGone = false
    }

    private static let state = Mutex(State())

    /// One line (unbuffered), its control characters escaped; a gauge on screen is cleared first.
    public static func line(_ text: String) {
        escapedLines(TerminalText.escapingControlCharacters(text) + "\n")
    }

    /// Lines already escaped (``TerminalText/escapingControlCharacters(_:)``), each ended by a
    /// newline, in one write; a gauge on screen is cleared first.
    public static func escapedLines(_ text: String) {
        var text = text
        text.withUTF8 { escapedLines(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// ``escapedLines(_:)`` for lines held as UTF-8 bytes.
    public static func escapedLines(bytes: UnsafeRawBufferPointer) {
        state.withLock { s in
            guard !s.readerGone else { return }
            if s.gaugeShown {
                Sys.writeAll(2, "\r\u{1B}[2K")
                s.gaugeShown = false
            }
            _ = Sys.writeAll(2, bytes)
        }
    }

    /// The live gauge: `text` as it is (its own escape sequences), without a newline.
    public static func gauge(_ text: String) {
        state.withLock { s in
            Sys.writeAll(2, text)
            s.gaugeShown = true
        }
    }

    /// Clears the gauge if one is on screen.
    public static func clearGauge() {
        state.withLock { s in
            if s.gaugeShown {
                Sys.writeAll(2, "\r\u{1B}[2K")
                s.gaugeShown = false
            }
        }
    }

    /// From now on stderr stays quiet (stdout's reader went away).
    public static func readerWentAway() { state.withLock { $0.readerGone = true } }

    /// Whether stdout's reader went away.
    public static var readerHasGone: Bool { state.withLock { $0.readerGone } }
}

/// cuff's `LogHandler`: each message one line on stderr as `LABEL: SCOPE: message` (the scopes
/// from ``Logger/scoped(_:)``), the lines cuff has always written. Levels say which lines the
/// options keep: events are `.info`, what `--quiet` keeps is `.notice` or above (a quiet logger's
/// level is `.notice`), and what only `--verbose` shows is `.debug`.
///
/// `cuff` bootstraps it once (``bootstrap()``); every `Logger(label:)` then writes through it.
public struct StandardErrorLogHandler: LogHandler {
    public let label: String
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    public init(label: String) {
        self.label = label
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        StandardError.line(LogLine.text(label: label, metadata: metadata, message: event.message))
    }

    /// Every `Logger(label:)` of the process writes through this handler.
    public static func bootstrap() {
        LoggingSystem.bootstrap { label in StandardErrorLogHandler(label: label) }
    }
}

/// How a message becomes a line: `LABEL: SCOPE: message`, each part only when it is not empty.
enum LogLine {
    static let scopeKey = "scope"

    static func text(label: String, metadata: Logger.Metadata, message: Logger.Message) -> String {
        var line = label.isEmpty ? "" : label + ": "
        if case let .string(scope)? = metadata[scopeKey] { line += scope + ": " }
        return line + message.description
    }
}

extension Logger {
    /// This logger with `scope` after its label (and after any scope it had): the lines of one
    /// cuff of a fleet (`cuff simulate: cuff-0001: …`), of one device, of the pairing agent.
    public func scoped(_ scope: String) -> Logger {
        var l = self
        if case let .string(outer)? = l[metadataKey: LogLine.scopeKey] {
            l[metadataKey: LogLine.scopeKey] = .string(outer + ": " + scope)
        } else {
            l[metadataKey: LogLine.scopeKey] = .string(scope)
        }
        return l
    }

    /// This logger at `level`.
    public func at(_ level: Logger.Level) -> Logger {
        var l = self
        l.logLevel = level
        return l
    }

    /// A logger that says nothing (the default where a caller wants no lines).
    public static var silent: Logger { Logger(label: "", factory: { _ in SwiftLogNoOpLogHandler() }) }
}

/// A logger's lines kept in memory (tests, and callers that show them later): each line as
/// ``StandardErrorLogHandler`` writes it, without the label.
public final class LogRecorder: Sendable {
    private let kept = Mutex<[String]>([])

    public init() {}

    /// The lines so far.
    public var lines: [String] { kept.withLock { $0 } }

    /// A logger (level `level`) whose lines this recorder keeps.
    public func logger(level: Logger.Level = .trace) -> Logger {
        var l = Logger(label: "", factory: { _ in Handler(recorder: self) })
        l.logLevel = level
        return l
    }

    func append(_ line: String) { kept.withLock { $0.append(line) } }

    struct Handler: LogHandler {
        let recorder: LogRecorder
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]
        var metadataProvider: Logger.MetadataProvider?

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            recorder.append(LogLine.text(label: "", metadata: metadata, message: event.message))
        }
    }
}
