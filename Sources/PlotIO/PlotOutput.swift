// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Plot

/// Why a plot could not be written.
public enum PlotOutputError: Error, Equatable, CustomStringConvertible {
    case unsupportedExtension(String)
    case rsvgMissing
    case rsvgFailed(status: Int32, stderr: String)
    case write(path: String, reason: String)

    public var description: String {
        switch self {
        case let .unsupportedExtension(p): "\(p): the output must end in .svg or .png"
        case .rsvgMissing:
            "PNG output needs rsvg-convert, which is not installed (Debian/Ubuntu: apt-get install librsvg2-bin); write .svg instead"
        case let .rsvgFailed(status, stderr):
            "rsvg-convert failed (status \(status))" + (stderr.isEmpty ? "" : ": " + stderr)
        case let .write(path, reason): "cannot write \(path): \(reason)"
        }
    }
}

public enum PlotOutput {
    public enum Kind: Sendable { case svg, png }

    /// The kind of file `path` asks for, from its extension.
    public static func kind(of path: String) throws(PlotOutputError) -> Kind {
        switch URL(fileURLWithPath: path).pathExtension.lowercased() {
        case "svg": .svg
        case "png": .png
        default: throw .unsupportedExtension(path)
        }
    }

    /// `rsvg-convert` on PATH, if installed.
    public static func rsvgConvert(path: String? = ProcessInfo.processInfo.environment["PATH"]) -> String? {
        for dir in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") {
            let candidate = String(dir) + "/rsvg-convert"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// Writes `svg` (the document's text) to `path`, as SVG or, for `.png`, rendered by rsvg-convert.
    public static func write(_ svg: String, to path: String) throws(PlotOutputError) {
        let kind = try kind(of: path)
        try checkWritable(path)
        switch kind {
        case .svg:
            do { try Data(svg.utf8).write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
                throw .write(path: path, reason: (error as NSError).localizedDescription)
            }
        case .png:
            try renderPNG(svg, to: path)
        }
    }

    /// Throws ``PlotOutputError/write(path:reason:)`` when `path` cannot be written as a file: it is
    /// a directory, or its directory is missing or not writable. (Probe X: a PNG there was
    /// "rsvg-convert failed", status 4, and an SVG named a Foundation error number.)
    static func checkWritable(_ path: String) throws(PlotOutputError) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw .write(path: path, reason: "is a directory")
        }
        let parent = (path as NSString).deletingLastPathComponent
        let dir = parent.isEmpty ? "." : parent
        guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw .write(path: path, reason: "no such directory \(dir)")
        }
        guard access(dir, W_OK) == 0 else { throw .write(path: path, reason: "the directory \(dir) is not writable") }
    }

    /// Renders SVG text to a PNG file with rsvg-convert (white background, 1:1 scale).
    ///
    /// The SVG goes to rsvg-convert through a pipe, never through a file: a temporary copy of the
    /// readings in `$TMPDIR` was readable by other users while it ran, and stayed behind when cuff
    /// was interrupted (probe X; the store it came from may be encrypted).
    public static func renderPNG(_ svg: String, to path: String, rsvg: String? = rsvgConvert()) throws(PlotOutputError)
    {
        guard let rsvg else { throw .rsvgMissing }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: rsvg)
        p.arguments = ["--format", "png", "--background-color", "white", "--output", path]
        let input = Pipe()
        let err = Pipe()
        p.standardInput = input
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        do { try p.run() } catch { throw .rsvgFailed(status: -1, stderr: (error as NSError).localizedDescription) }
        // Written from another thread while this one reads stderr: neither pipe can fill up and
        // stop both processes. (A renderer that exits early only makes the write fail: SIGPIPE
        // is ignored.)
        let bytes = Data(svg.utf8)
        let sink = input.fileHandleForWriting
        let writer = Thread {
            try? sink.write(contentsOf: bytes)
            try? sink.close()
        }
        writer.start()
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw .rsvgFailed(
                status: p.terminationStatus, stderr: message.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }
}
