// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffCommands
import Foundation
import MQTTSink
import Sinks
import Transport

/// `--publish mqtt://…` and its companions: readings published to MQTT brokers, with Home Assistant
/// discovery, through a local outbox each.
public struct PublishOptions: ParsableArguments {
    public init() {}

    @Option(
        name: .customLong("publish"),
        help: ArgumentHelp(
            "Also publish every reading to an MQTT broker: mqtt://[USER[:PASSWORD]@]HOST[:PORT][/PREFIX] or mqtts://… (TLS), through a local outbox, QoS 1, with Home Assistant discovery (repeatable).",
            valueName: "url"))
    public var publish: [String] = []

    @Option(
        name: .customLong("publish-ca"),
        help: ArgumentHelp(
            "With mqtts://: the CA certificates the broker's must chain to (default: the system's).", valueName: "file")
    )
    public var publishCA: String?

    @Option(
        name: .customLong("publish-cert"),
        help: ArgumentHelp("With mqtts://: a client certificate (PEM) to log in with.", valueName: "file"))
    public var publishCert: String?

    @Option(
        name: .customLong("publish-key"),
        help: ArgumentHelp("With --publish-cert: its private key (PEM).", valueName: "file"))
    public var publishKey: String?

    @Option(
        name: .customLong("publish-password-file"),
        help: ArgumentHelp(
            "The broker password, the file's first line, when the URL has none (else $CUFF_MQTT_PASSWORD).",
            valueName: "file"))
    public var publishPasswordFile: String?

    @Option(
        name: .customLong("ha-discovery-prefix"),
        help: ArgumentHelp("Home Assistant's discovery prefix (default homeassistant).", valueName: "prefix"))
    public var haDiscoveryPrefix: String = "homeassistant"

    @Flag(name: .customLong("no-ha-discovery"), help: "Publish no Home Assistant discovery configs.")
    public var noHADiscovery = false

    @Option(
        name: .customLong("user-name"),
        help: ArgumentHelp("A cuff user's name for Home Assistant, e.g. 1=Alice (repeatable).", valueName: "id=name"))
    public var userNames: [String] = []

    @Option(
        name: .customLong("cuff-timezone"),
        help: ArgumentHelp(
            "The zone the cuffs' clocks are set in (e.g. Europe/Berlin, UTC, +01:00): cuff sets them in it, and gives their times its offset (FHIR, OMH, the store, MQTT); default: the host's.",
            valueName: "zone"))
    public var cuffTimezone: String?

    public var isEnabled: Bool { !publish.isEmpty }

    public func validate() throws {
        // The password file is not read here (a pipe can be read only once): ``setup()`` reads it.
        for p in publish { _ = try parse(p, filePassword: publishPasswordFile.map { _ in "" }) }
        if !isEnabled
            && (publishCA != nil || publishCert != nil || publishKey != nil || publishPasswordFile != nil
                || !userNames.isEmpty)
        {
            throw ValidationError(
                "--publish-ca, --publish-cert, --publish-key, --publish-password-file and --user-name go with --publish mqtt://…"
            )
        }
        if (publishCert == nil) != (publishKey == nil) {
            throw ValidationError("--publish-cert and --publish-key go together")
        }
        // (TLS files beside plain mqtt:// alone would be ignored, and the readings sent in the clear.)
        if publishCA != nil || publishCert != nil, isEnabled,
            !publish.contains(where: { $0.lowercased().hasPrefix("mqtts://") })
        {
            throw ValidationError(
                "--publish-ca, --publish-cert and --publish-key are for TLS: give --publish mqtts://… (mqtt:// sends without TLS)"
            )
        }
        for (option, file) in [
            ("--publish-ca", publishCA), ("--publish-cert", publishCert), ("--publish-key", publishKey),
        ] {
            if let file, !FileManager.default.isReadableFile(atPath: file) {
                throw ValidationError(
                    "\(option) \(file): \(FileManager.default.fileExists(atPath: file) ? "cannot be read" : "no such file")"
                )
            }
        }
        _ = try names()
        _ = try offsetPolicy()
        if haDiscoveryPrefix.isEmpty || MQTTTopics.problem(prefix: haDiscoveryPrefix) != nil {
            throw ValidationError(
                "--ha-discovery-prefix takes a topic prefix without wildcards or control characters, at most \(MQTTTopics.longestPrefix) bytes"
            )
        }
    }

    /// A `--publish` URL with its password: the URL's, else `filePassword` (the password file's,
    /// read once), else `CUFF_MQTT_PASSWORD`.
    public func parse(_ text: String, filePassword: String?) throws -> MQTTURL {
        do { return try MQTTURL(parsing: text).resolvingPassword(fromFile: filePassword) } catch {
            throw ValidationError("--publish: \(error)")
        }
    }

    /// The password file's first line, read once; nil without `--publish-password-file`.
    public func filePassword() throws -> String? {
        guard let file = publishPasswordFile else { return nil }
        do { return try MQTTURL.readPasswordFile(file) } catch {
            throw ValidationError("--publish-password-file: \(error)")
        }
    }

    public func names() throws -> [UInt8: String] { try usage { try MQTTPublishing.userNames(userNames) } }

    /// `--cuff-timezone`: that zone's offsets, else the host zone's.
    public func offsetPolicy() throws -> UTCOffsetPolicy {
        try usage { try MQTTPublishing.offsetPolicy(zone: cuffTimezone) }
    }

    /// The offset the cuffs' clocks are set with now: `--cuff-timezone` `zone`'s, else nil (the host's).
    static func cuffClockOffset(zone: String?) -> Int64? {
        guard let zone else { return nil }
        let now = WallClock.system.nowMicros() / 1_000_000
        return UTCOffsetPolicy.cuffClockOffset(zone: zone, atUnixSeconds: now).map(Int64.init)
    }

    /// The brokers, parsed; nil without `--publish`.
    public func setup() throws -> MQTTPublishing? {
        guard isEnabled else { return nil }
        let password = try filePassword()
        return MQTTPublishing(
            urls: try publish.map { try parse($0, filePassword: password) }, caFile: publishCA, certFile: publishCert,
            keyFile: publishKey,
            discovery: noHADiscovery
                ? nil
                : HomeAssistantDiscovery(
                    prefix: haDiscoveryPrefix, userNames: try names(), version: CuffRelease.version),
            utcOffset: try offsetPolicy())
    }
}
