// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import Transport

/// `--format omh`: Open mHealth data points, one per line.
///
/// A measurement gives a `omh:blood-pressure:4.0` data point (systolic, diastolic in mmHg, kPa
/// converted) and, when its pulse rate is a number, a `omh:heart-rate:2.0` data point. Open mHealth
/// has no "absent" value: a non-finite systolic or diastolic drops the blood-pressure point and a
/// non-finite pulse drops the heart-rate point, each with a ``SinkWarning``. MAP, status and user
/// have no slot and are left out (they stay in NDJSON).
///
/// Header: `id` a UUID v4 from the injected ``UUIDGenerator``; `creation_date_time` from the
/// injected ``WallClock`` (when the data point is made); `acquisition_provenance` with
/// `source_name` "BLE BPM <device>", `source_data_point_id` the record's dedup key and
/// `modality` `sensed`. `effective_time_frame.date_time` is ``EffectiveTime/of(_:offset:)``.
public final class OMHSink: SampleSink, Sendable {
    public let output: any LineOutput
    public let ids: UUIDGenerator
    public let clock: WallClock
    public let utcOffset: UTCOffsetPolicy
    public let warn: SinkWarningHandler
    private let done = FinishGuard("omh")

    public init(
        output: any LineOutput, ids: UUIDGenerator = .system(), clock: WallClock = .system,
        utcOffset: UTCOffsetPolicy = .system,
        warn: @escaping SinkWarningHandler = SinkWarnings.standardError
    ) {
        self.output = output
        self.ids = ids
        self.clock = clock
        self.utcOffset = utcOffset
        self.warn = warn
    }

    public func write(_ o: SessionOutput) throws(SinkError) {
        try done.check()
        guard case let .measurement(m) = o else { return }
        for p in dataPoints(for: m) { try output.writeLine(p.serialized()) }
        try output.flush()
    }

    public func finish() throws(SinkError) {
        try done.finish()
        try output.flush()
    }

    /// The data points for one measurement (possibly none), warning about what was dropped.
    public func dataPoints(for m: MeasurementRecord) -> [JSON] {
        let effective = JSON.object([("date_time", .string(EffectiveTime.of(m, offset: utcOffset).rfc3339))])
        var out: [JSON] = []
        if let s = ClinicalValue.mmHg(m.systolic, unit: m.unit), let d = ClinicalValue.mmHg(m.diastolic, unit: m.unit) {
            out.append(
                dataPoint(
                    m, name: "blood-pressure", version: "4.0",
                    body: [
                        ("systolic_blood_pressure", .object([("value", .double(s)), ("unit", .string("mmHg"))])),
                        ("diastolic_blood_pressure", .object([("value", .double(d)), ("unit", .string("mmHg"))])),
                        ("effective_time_frame", effective),
                    ]))
        } else {
            warn(
                SinkWarning(
                    sink: "omh",
                    message:
                        "no blood-pressure data point: systolic \(m.systolic), diastolic \(m.diastolic) (Open mHealth has no absent value)",
                    dedupKey: m.dedupKey))
        }
        if let pulse = m.pulseRate {
            if let bpm = pulse.doubleValue {
                out.append(
                    dataPoint(
                        m, name: "heart-rate", version: "2.0",
                        body: [
                            ("heart_rate", .object([("value", .double(bpm)), ("unit", .string("beats/min"))])),
                            ("effective_time_frame", effective),
                        ]))
            } else {
                warn(
                    SinkWarning(
                        sink: "omh",
                        message: "no heart-rate data point: pulse rate \(pulse) (Open mHealth has no absent value)",
                        dedupKey: m.dedupKey))
            }
        }
        return out
    }

    private func dataPoint(_ m: MeasurementRecord, name: String, version: String, body: [(String, JSON)]) -> JSON {
        .object([
            (
                "header",
                .object([
                    ("id", .string(ids.make())),
                    ("creation_date_time", .string(EventTime.iso8601(wallMicros: clock.nowMicros()))),
                    (
                        "schema_id",
                        .object([("namespace", .string("omh")), ("name", .string(name)), ("version", .string(version))])
                    ),
                    (
                        "acquisition_provenance",
                        .object([
                            ("source_name", .string("BLE BPM " + m.device.humanName)),
                            ("source_data_point_id", .string(m.dedupKey)),
                            ("modality", .string("sensed")),
                        ])
                    ),
                ])
            ),
            ("body", .object(body)),
        ])
    }
}
