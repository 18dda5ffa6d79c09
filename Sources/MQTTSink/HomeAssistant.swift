// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import Sinks

/// Where a cuff's readings go on the broker: `PREFIX/DEVICE/USER/reading` (every reading, not
/// retained), `PREFIX/DEVICE/USER/state` (the latest, retained) and `PREFIX/status`.
public struct MQTTTopics: Sendable, Hashable {
    public var prefix: String

    public init(prefix: String) { self.prefix = prefix }

    /// The longest topic prefix taken, in UTF-8 bytes: a topic is at most 65,535 bytes, and a
    /// cuff's own level (its serial, up to an attribute's 512 bytes) must still fit after it.
    public static let longestPrefix = 4096

    /// Why `prefix` cannot start a topic (nil: it can): the wildcards `+` and `#`, U+0000 (no
    /// topic may hold it), other control characters (none should), or more than
    /// ``longestPrefix`` bytes. libmosquitto refuses such a topic only when it is published, so the
    /// readings would wait in the outbox for good.
    public static func problem(prefix: String) -> String? {
        if prefix.contains("+") || prefix.contains("#") { return "may not contain the wildcards + or #" }
        if prefix.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "may not contain control characters"
        }
        if prefix.utf8.count > longestPrefix { return "may be at most \(longestPrefix) bytes long" }
        return nil
    }

    /// `PREFIX/status`: `online` while connected, `offline` as the last will.
    public var status: String { prefix + "/status" }

    /// The DEVICE level: the serial when the cuff gave a distinct one (not a placeholder many cuffs
    /// share), else its address, as topic-safe text.
    public static func deviceLevel(_ d: DeviceInfo) -> String { slug(d.distinctSerial ?? d.address) }

    /// The USER level: the BPS user id, or `none` when the reading names no user.
    public static func userLevel(_ user: UInt8?) -> String { user.map { String($0) } ?? "none" }

    public func reading(_ d: DeviceInfo, user: UInt8?) -> String {
        "\(prefix)/\(Self.deviceLevel(d))/\(Self.userLevel(user))/reading"
    }
    public func state(_ d: DeviceInfo, user: UInt8?) -> String {
        "\(prefix)/\(Self.deviceLevel(d))/\(Self.userLevel(user))/state"
    }

    /// Letters, digits, `-` and `_` kept; anything else (`:` of an address, `/`, `+`, `#`, spaces) `_`.
    public static func slug(_ s: String) -> String { Outbox.slug(s) }
}

/// The payloads `--publish` sends.
public enum MQTTPayload {
    /// 1 kPa in mmHg (101.325 kPa = 760 mmHg).
    static let mmHgPerKPa = 760.0 / 101.325

    /// `PREFIX/DEVICE/USER/reading`: the NDJSON measurement record, with `dedup_key`, the reading's
    /// deduplication id (a QoS 1 repeat carries the same one).
    public static func reading(_ m: MeasurementRecord) -> JSON {
        guard case let .object(pairs) = SessionOutput.measurement(m).json else { return .null }
        return .object(pairs + [("dedup_key", .string(m.dedupKey))])
    }

    /// A pressure in mmHg (kPa converted, one decimal), or null for a special value (NaN, NRes, ±INF).
    static func mmHg(_ v: SFloat, unit: PressureUnit) -> JSON {
        guard let d = v.doubleValue, d.isFinite else { return .null }
        switch unit {
        case .mmHg: return .double(d)
        case .kPa: return .double((d * mmHgPerKPa * 10).rounded() / 10)
        }
    }

    /// `PREFIX/DEVICE/USER/state`: what the Home Assistant entities read, flat. Pressures in mmHg,
    /// pulse in bpm, a special value as null (never a number; Home Assistant shows `unknown`);
    /// `measured_at` with an explicit UTC offset (the cuff's clock has no zone: the offset of
    /// `offset`'s zone at that time, `time_basis` says so); the status flags as `ON`/`OFF` (null
    /// when the reading has no status), exactly the binary sensors' payloads.
    public static func state(_ m: MeasurementRecord, offset: UTCOffsetPolicy) -> JSON {
        let t = EffectiveTime.of(m, offset: offset)
        func flag(_ f: (MeasurementStatus) -> Bool) -> JSON { m.status.map { .string(f($0) ? "ON" : "OFF") } ?? .null }
        let pulse: JSON =
            m.pulseRate.flatMap { p in p.doubleValue.flatMap { $0.isFinite ? JSON.double($0) : nil } } ?? .null
        return .object([
            ("dedup_key", .string(m.dedupKey)),
            ("systolic", mmHg(m.systolic, unit: m.unit)),
            ("diastolic", mmHg(m.diastolic, unit: m.unit)),
            ("mean_arterial_pressure", mmHg(m.meanArterialPressure, unit: m.unit)),
            ("unit", .string("mmHg")),
            ("pulse_rate", pulse),
            ("measured_at", .string(t.rfc3339)),
            ("time_basis", .string(t.basis.rawValue)),
            ("irregular_pulse", flag(\.irregularPulse)),
            ("body_movement", flag(\.bodyMovement)),
            ("user", m.userID.map { .int(Int64($0)) } ?? .null),
            ("received_at", .string(m.receivedAt.iso8601)),
            ("device", m.device.json),
        ])
    }
}

/// Home Assistant MQTT discovery: retained config messages that make one Home Assistant device per
/// cuff and user, as Home Assistant documents them (https://www.home-assistant.io/integrations/mqtt/#mqtt-discovery,
/// …/sensor.mqtt/, …/binary_sensor.mqtt/). Only documented keys, full names (no abbreviations).
public struct HomeAssistantDiscovery: Sendable, Hashable {
    /// `--ha-discovery-prefix` (Home Assistant's default `homeassistant`).
    public var prefix: String
    /// `--user-name 1=Alice`.
    public var userNames: [UInt8: String]
    public var version: String

    public init(prefix: String = "homeassistant", userNames: [UInt8: String] = [:], version: String = "0.1.0") {
        self.prefix = prefix
        self.userNames = userNames
        self.version = version
    }

    /// One entity of the device.
    struct Entity {
        var component: String
        var key: String
        var name: String
        var extra: [(String, JSON)]
    }

    static let entities: [Entity] = [
        Entity(
            component: "sensor", key: "systolic", name: "Systolic",
            extra: [
                ("unit_of_measurement", .string("mmHg")), ("state_class", .string("measurement")),
                ("icon", .string("mdi:heart-pulse")),
            ]),
        Entity(
            component: "sensor", key: "diastolic", name: "Diastolic",
            extra: [
                ("unit_of_measurement", .string("mmHg")), ("state_class", .string("measurement")),
                ("icon", .string("mdi:heart-pulse")),
            ]),
        Entity(
            component: "sensor", key: "mean_arterial_pressure", name: "Mean arterial pressure",
            extra: [
                ("unit_of_measurement", .string("mmHg")), ("state_class", .string("measurement")),
                ("icon", .string("mdi:heart-pulse")),
            ]),
        Entity(
            component: "sensor", key: "pulse_rate", name: "Pulse",
            extra: [
                ("unit_of_measurement", .string("bpm")), ("state_class", .string("measurement")),
                ("icon", .string("mdi:heart")),
            ]),
        Entity(
            component: "sensor", key: "measured_at", name: "Measured at",
            extra: [("device_class", .string("timestamp"))]),
        Entity(
            component: "binary_sensor", key: "irregular_pulse", name: "Irregular pulse",
            extra: [
                ("device_class", .string("problem")), ("payload_on", .string("ON")), ("payload_off", .string("OFF")),
            ]),
        Entity(
            component: "binary_sensor", key: "body_movement", name: "Body movement",
            extra: [
                ("device_class", .string("moving")), ("payload_on", .string("ON")), ("payload_off", .string("OFF")),
            ]),
    ]

    /// The Home Assistant device's id for a cuff and user: stable as long as the cuff's serial (else
    /// address) and the user id are.
    public static func nodeID(_ d: DeviceInfo, user: UInt8?) -> String {
        "cuff_\(MQTTTopics.deviceLevel(d))_\(MQTTTopics.userLevel(user))"
    }

    /// The config messages (topic, retained payload) for a cuff and user.
    public func configs(device d: DeviceInfo, user: UInt8?, topics: MQTTTopics) -> [(topic: String, payload: JSON)] {
        let node = Self.nodeID(d, user: user)
        let cuffName = d.model ?? d.name ?? "Blood pressure cuff"
        let userName = user.map { userNames[$0] ?? "user \($0)" }
        var device: [(String, JSON)] = [
            ("identifiers", .array([.string(node)])),
            ("name", .string(userName.map { "\(cuffName) (\($0))" } ?? cuffName)),
        ]
        if let m = d.manufacturer { device.append(("manufacturer", .string(m))) }
        if let m = d.model { device.append(("model", .string(m))) }
        if let s = d.serial { device.append(("serial_number", .string(s))) }
        if let f = d.firmware { device.append(("sw_version", .string(f))) }
        let origin: JSON = .object([
            ("name", .string("cuff")), ("sw_version", .string(version)),
        ])
        return Self.entities.map { e in
            var c: [(String, JSON)] = [
                ("name", .string(e.name)),
                ("unique_id", .string("\(node)_\(e.key)")),
                ("state_topic", .string(topics.state(d, user: user))),
                ("value_template", .string("{{ value_json.\(e.key) }}")),
                ("availability_topic", .string(topics.status)),
                ("payload_available", .string("online")),
                ("payload_not_available", .string("offline")),
                ("qos", .int(1)),
            ]
            c += e.extra
            c += [("device", .object(device)), ("origin", origin)]
            return ("\(prefix)/\(e.component)/\(node)/\(e.key)/config", .object(c))
        }
    }
}
