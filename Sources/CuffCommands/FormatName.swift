// SPDX-License-Identifier: GPL-2.0-or-later
import Capture
import Sinks

/// A `--format` value: an output format or (`cuff replay`) the capture's format; the two sets of
/// names do not overlap.
public enum FormatName: Equatable, Sendable {
    case output(OutputFormat)
    case capture(CaptureFormat)

    /// `name` as one of either set, or nil.
    public init?(parsing name: String) {
        if let f = try? OutputFormat(parsing: name) {
            self = .output(f)
        } else if let c = CaptureFormat(rawValue: name) {
            self = .capture(c)
        } else {
            return nil
        }
    }

    /// Every name `--format` takes.
    public static var allNames: [String] {
        OutputFormat.allCases.map(\.rawValue) + CaptureFormat.allCases.map(\.rawValue)
    }
}

extension Array where Element == FormatName {
    /// The output format the values name (the last one given; default NDJSON).
    public var output: OutputFormat {
        for case let .output(f) in reversed() { return f }
        return .ndjson
    }

    /// The capture format the values name, if any (the last one given).
    public var capture: CaptureFormat? {
        for case let .capture(c) in reversed() { return c }
        return nil
    }
}
