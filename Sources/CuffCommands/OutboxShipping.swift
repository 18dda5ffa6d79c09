// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import CuffCore
import Logging
import MQTTSink
import PostgresStore
import Sinks

/// `cuff sync`: what waits in the outboxes shipped to the PostgreSQL store and published to the
/// MQTT brokers. Each returns whether readings still wait; a failure to open an outbox throws
/// ``ExitStatus/sinkFailed``. Lines go to stderr as `cuff sync: …` (`quiet`: only what still waits).
public enum OutboxShipping {
    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    static var log: Logger { Console.logger("cuff sync") }

    /// `--publish`: each broker's outbox published.
    /// - Parameter given: the outbox named with `--outbox`: when a broker's outbox is that very
    ///   path and it does not exist, that is a mistake (a typo would otherwise make an empty
    ///   outbox and report it "empty"), exit status 10.
    public static func publishAll(_ targets: [MQTTPublishOptions], quiet: Bool, given: String? = nil) throws(ExitStatus)
        -> Bool
    {
        var waiting = false
        var unreadable = false
        for t in targets {
            if t.outboxPath == given && !Self.exists(t.outboxPath) {
                log.info("no outbox at \(t.outboxPath): nothing was ever kept there (check --outbox)")
                throw .sinkFailed
            }
            let box: MQTTOutboxStore
            do {
                // No check at open: a refusal is said below, once, with what waits.
                box = try MQTTOutboxStore(options: t, check: false, warn: SinkWarnings.ignore)
            } catch {
                log.info("\(error)")
                throw .sinkFailed
            }
            for n in box.notices { log.info("\(n)") }
            let path = box.outboxPath
            let r = box.publishAll(timeout: .seconds(120))
            try? box.close()
            if r.waiting == nil || r.failure?.code == .outbox {
                // Damaged, or on a failing disk: not a matter of waiting for the broker.
                let why = r.countError.map { "\($0)" } ?? r.failure.map { "\($0)" } ?? "cannot be read"
                log.info(
                    "published \(r.delivered) reading\(r.delivered == 1 ? "" : "s"); the outbox \(path) cannot be read: \(why)"
                )
                unreadable = true
            } else if let failure = r.failure, let n = r.waiting, n != 0 {
                log.info(
                    "published \(r.delivered) reading\(r.delivered == 1 ? "" : "s"); \(n) still wait in the outbox \(path): \(failure)"
                )
                waiting = true
            } else if !quiet {
                log.info(
                    "published \(r.delivered) reading\(r.delivered == 1 ? "" : "s") to \(t.url); the outbox \(path) is empty"
                )
            }
        }
        if given == nil, let dir = targets.first.map({ ($0.outboxPath as NSString).deletingLastPathComponent }) {
            mentionOtherBrokersOutboxes(
                in: dir, besides: Set(targets.flatMap { [$0.outboxPath] + ($0.taggedOutboxPath.map { [$0] } ?? []) }))
        }
        if unreadable { throw .sinkFailed }
        return waiting
    }

    /// Says which other brokers' outboxes beside the default ones still hold readings (probe Y:
    /// after the broker's address was corrected, `cuff sync` said "the outbox is empty", exit 0,
    /// while 17 readings waited in the outbox named after the old address). Nothing is shipped
    /// from them: they are named, with how many wait.
    static func mentionOtherBrokersOutboxes(in dir: String, besides: Set<String>) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: dir) else { return }
        for name in names.sorted() where name.hasPrefix("mqtt-") && name.hasSuffix(".db") {
            let path = dir + "/" + name
            guard !besides.contains(path),
                let store = try? SQLiteStore(path: path, mustExist: true, readOnly: true, warn: SinkWarnings.ignore)
            else { continue }
            let n = try? store.count()
            try? store.finish()
            guard let n, n > 0 else { continue }
            log.info(
                "note: \(n) reading\(n == 1 ? "" : "s") also wait\(n == 1 ? "s" : "") in \(path), the outbox of another broker address or topic prefix (cuff sync --publish mqtt://… --outbox \(path) sends them there)"
            )
        }
    }

    /// `--store postgres://…`: the outbox at `outbox` (default: the server's database's, see
    /// ``PostgresOutboxStore/init(url:outboxPath:utcOffset:background:batchSize:environment:warn:)``)
    /// shipped in transactions of `batch` readings.
    public static func ship(to store: String, outbox: String?, batch: Int, quiet: Bool) throws(ExitStatus) -> Bool {
        let url: PostgresURL
        do { url = try PostgresURL(parsing: store) } catch {
            log.info("\(error)")
            throw .sinkFailed
        }
        if let outbox, !Self.exists(outbox) {
            log.info("no outbox at \(outbox): nothing was ever kept there (check --outbox)")
            throw .sinkFailed
        }
        let box: PostgresOutboxStore
        do {
            // Warnings (an unreachable server) are said below, once, with the count.
            box = try PostgresOutboxStore(
                url: url, outboxPath: outbox, background: false, batchSize: batch, warn: SinkWarnings.ignore)
        } catch {
            log.info("\(error)")
            throw .sinkFailed
        }
        let path = box.outboxPath
        for n in box.notices { log.info("\(n)") }
        let result = box.drain()
        let counted = Result { () throws(SinkError) in try box.outbox.count() }
        try? box.close()
        let waiting: Int
        switch counted {
        case .success(let n): waiting = n
        case .failure(let e):
            log.info(
                "shipped \(result.shipped) reading\(result.shipped == 1 ? "" : "s"); the outbox \(path) cannot be read: \(e)"
            )
            throw .sinkFailed
        }
        if let failure = result.failure, waiting != 0 {
            log.info(
                "shipped \(result.shipped) reading\(result.shipped == 1 ? "" : "s"); \(waiting) still wait in the outbox \(path): \(failure)"
            )
            return true
        }
        if waiting != 0, result.unreadable.count > 0 {
            // Not the server's doing: rows that cannot be read stay (as for a damaged outbox).
            let u = result.unreadable
            log.info(
                "shipped \(result.shipped) reading\(result.shipped == 1 ? "" : "s"); the outbox \(path) cannot be read: \(u.rows.noun) of it \(u.rows.stay) there \(u.reasonList)"
            )
            throw .sinkFailed
        }
        if !quiet {
            log.info(
                "shipped \(result.shipped) reading\(result.shipped == 1 ? "" : "s") to \(url) (\(result.new) new there); the outbox \(path) is empty"
            )
        }
        return false
    }
}
