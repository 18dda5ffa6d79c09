// SPDX-License-Identifier: GPL-2.0-or-later
import CuffSession
import Sinks

/// The SQLite store as the CLI uses it (opened by `--store PATH`).
final class SQLiteStore: SampleSink, Sendable {
    init(path: String) throws { throw SinkError.storeOpen(path: path, reason: "the store is not in this build yet") }
    func write(_ output: SessionOutput) throws(SinkError) {}
    func finish() throws(SinkError) {}
    func knownKeys() -> Set<String> { [] }
    func lastSequenceNumber(address: String) -> UInt16? { nil }
}
