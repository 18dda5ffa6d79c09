// SPDX-License-Identifier: GPL-2.0-or-later
import MQTTSink
import PostgresStore
import ReplayEngine
import Sinks

/// Where a command's records go (`--format`, `--store`, `--outbox`, `--publish`, `--quiet`), and
/// the sinks made from it: the store first (a record it cannot keep is not printed), then stdout.
public struct SinkSetup {
    public var format: OutputFormat = .ndjson
    /// `--store`: an SQLite path or a postgres:// URL.
    public var store: String?
    /// `--outbox`: the local outbox of a postgres:// store or of `--publish`.
    public var outbox: String?
    /// The store's key file (used only with a store).
    public var keyPath: String?
    public var fhirSubject: String?
    /// No sink warnings on stderr.
    public var quiet = false
    /// `--publish`: the brokers, or nil.
    public var publishing: MQTTPublishing?
    /// The offset a zone-less cuff time gets (FHIR, OMH, the store's recorded offset, MQTT):
    /// `--cuff-timezone`'s zone, the one the cuffs' clocks are set in; else the host's.
    public var utcOffset: UTCOffsetPolicy = .system

    public init() {}

    public var configuration: SinkConfiguration {
        var c = SinkConfiguration(
            format: format, storePath: store,
            fhirSubject: fhirSubject.map(FHIRSubject.init(parsing:)) ?? .cuffUser,
            utcOffset: utcOffset, storeKeyPath: store == nil ? nil : keyPath)
        c.storeOpener = PostgresStoreOpener(outboxPath: outbox)
        return c
    }

    /// --quiet means nothing on stderr, sink warnings included.
    public var warn: SinkWarningHandler { quiet ? SinkWarnings.ignore : SinkWarnings.standardError }

    /// The store (when `--store`) and the stdout format sink; with `--publish`, the store is a
    /// ``StoreGroup`` of the `--store` and each broker's outbox.
    public func makeSinks() throws(SinkError) -> (FanOutSink, (any MeasurementStore)?) {
        var sinks = try SinkFactory.makeSinks(configuration, warn: warn)
        var store = sinks.first { $0 is any MeasurementStore } as? any MeasurementStore
        if publishing != nil {
            let group: any MeasurementStore
            do { group = try withPublishers(store) } catch {
                try? store?.finish()
                throw error
            }
            if store != nil { sinks.removeFirst() }
            sinks.insert(group, at: 0)
            store = group
        }
        return (FanOutSink(sinks), store)
    }

    /// `store` with the `--publish` targets' outboxes beside it (`store` itself without `--publish`).
    public func withPublishers(_ store: (any MeasurementStore)?) throws(SinkError) -> any MeasurementStore {
        var publishers: [MQTTOutboxStore] = []
        if let publishing {
            do {
                publishers = try publishing.openStores(
                    outbox: outbox, sharedWithStore: store is PostgresOutboxStore, warn: warn)
            } catch let e as SinkError {
                throw e
            } catch {
                throw .storeOpen(path: "--publish", reason: "\(error)")
            }
        }
        let all: [any MeasurementStore] = (store.map { [$0] } ?? []) + publishers
        return all.count == 1 ? all[0] : StoreGroup(all)
    }

    /// `cuff replay`'s sinks: the store (and publishers), then stdout; NDJSON through the
    /// replay's own buffered writer (same bytes as NDJSONSink, fewer syscalls).
    public func replaySinks(realtime: Bool) throws(SinkError) -> ReplaySinks {
        var list: [any SampleSink & Sendable] = []
        let store = try self.store.map { p throws(SinkError) in try SinkFactory.openStore(p, configuration) }
        if let s = publishing != nil ? try withPublishers(store) : store { list.append(s) }
        list.append(
            format == .ndjson
                ? ReplayNDJSONSink(flushEachRecord: realtime || list.count > 0)
                : SinkFactory.formatSink(configuration, output: FileDescriptorOutput.standardOutput(), warn: warn))
        return ReplaySinks(fan: FanOutSink(list), direct: list.count == 1 ? list[0] as? ReplayNDJSONSink : nil)
    }
}

/// `--publish mqtt://…` and its companions, parsed: the brokers readings are published to, each
/// through a local outbox.
public struct MQTTPublishing {
    public var urls: [MQTTURL]
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?
    /// Home Assistant discovery, or nil for none.
    public var discovery: HomeAssistantDiscovery?
    public var utcOffset: UTCOffsetPolicy

    public init(
        urls: [MQTTURL], caFile: String?, certFile: String?, keyFile: String?, discovery: HomeAssistantDiscovery?,
        utcOffset: UTCOffsetPolicy
    ) {
        self.urls = urls
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
        self.discovery = discovery
        self.utcOffset = utcOffset
    }

    /// Each target's options. `outbox`: `--outbox`, the outbox of the only target when no PostgreSQL
    /// store uses it, else a base each target's name is made from (`PATH.HOST-PORT`). Two targets
    /// on one broker (the same host and port, other prefixes) each get an outbox and a client id of
    /// their own, named with their prefix too: sharing them, each reading would go to one prefix
    /// only, and the broker would drop one connection for the other. Without `--outbox`, each
    /// prefix has its default (``MQTTOutboxStore/defaultOutboxPath(for:tagged:environment:)``),
    /// alone or beside others: another process may publish to the same broker under another prefix.
    public func targets(outbox: String?, sharedWithStore: Bool) -> [MQTTPublishOptions] {
        let sharedBrokers = Set(Dictionary(grouping: urls, by: \.serverName).filter { $0.value.count > 1 }.keys)
        return urls.map { url in
            let tag = sharedBrokers.contains(url.serverName) ? "-" + MQTTTopics.slug(url.prefix) : ""
            let path: String
            if let outbox {
                path =
                    urls.count == 1 && !sharedWithStore
                    ? outbox : "\(outbox).\(MQTTTopics.slug(url.host))-\(url.port)\(tag)"
            } else {
                // (Named by the prefix alone or beside others: another process may publish to this
                // broker under another prefix, and a second `--publish` must not move the first's.)
                path = MQTTOutboxStore.defaultOutboxPath(for: url)
            }
            var options = MQTTPublishOptions(
                url: url, outboxPath: path, caFile: caFile, certFile: certFile, keyFile: keyFile, discovery: discovery,
                utcOffset: utcOffset,
                clientID: MQTTOutboxStore.defaultClientID()
                    + (urls.count > 1 ? "-\(MQTTTopics.slug(url.serverName))\(tag)" : ""))
            if outbox == nil {
                options.taggedOutboxPath = MQTTOutboxStore.defaultOutboxPath(for: url, tagged: true)
                options.legacyOutboxPaths = MQTTOutboxStore.legacyOutboxPaths(for: url)
            }
            return options
        }
    }

    /// One store per target (each checks that its broker takes this cuff).
    public func openStores(outbox: String?, sharedWithStore: Bool, warn: @escaping SinkWarningHandler) throws
        -> [MQTTOutboxStore]
    {
        var out: [MQTTOutboxStore] = []
        do {
            for t in targets(outbox: outbox, sharedWithStore: sharedWithStore) {
                out.append(try MQTTOutboxStore(options: t, warn: warn))
            }
        } catch {
            for s in out { try? s.close() }
            throw error
        }
        return out
    }
}

extension MQTTPublishing {
    /// An option of `--publish`'s companions that cannot be taken (``description`` says why).
    public struct OptionError: Error, Sendable, CustomStringConvertible {
        public enum Code: Sendable, Hashable { case userName, timeZone }
        public var code: Code
        public var description: String
    }

    /// `--user-name ID=NAME` (repeatable): a cuff user's name for Home Assistant.
    public static func userNames(_ texts: [String]) throws(OptionError) -> [UInt8: String] {
        var out: [UInt8: String] = [:]
        for n in texts {
            let parts = n.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let id = UInt8(parts[0]), !parts[1].isEmpty else {
                throw OptionError(
                    code: .userName,
                    description: "--user-name takes ID=NAME with a user id from 0 to 255, e.g. 1=Alice; got '\(n)'")
            }
            out[id] = parts[1]
        }
        return out
    }

    /// `--cuff-timezone`: that zone's offsets, else (nil) the host zone's.
    public static func offsetPolicy(zone: String?) throws(OptionError) -> UTCOffsetPolicy {
        guard let z = zone else { return .system }
        guard let p = UTCOffsetPolicy.cuffTimeZone(z) else {
            throw OptionError(
                code: .timeZone,
                description:
                    "--cuff-timezone: unknown zone '\(z)'; use a name like Europe/Berlin or an offset like +01:00")
        }
        return p
    }
}
