// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession

/// Who an Observation is about (`Observation.subject`, a FHIR Reference).
public enum FHIRSubject: Sendable, Hashable {
    /// The cuff's user slot: `{"identifier": {"system": "urn:cuff:cuff-user", "value": "<device identity>|user:<id>"},
    /// "display": "cuff user 1 on …"}`. The default: a gateway does not know the patient.
    case cuffUser
    /// `{"reference": "Patient/123"}`.
    case reference(String)
    /// `{"display": "Jane Doe"}`.
    case display(String)
    /// `{"identifier": {"system": …, "value": …}}`.
    case identifier(system: String, value: String)

    /// From a command-line value: `cuff-user` (the default), `Type/id` (a reference, e.g.
    /// `Patient/123`), `SYSTEM|VALUE` (an identifier), anything else a display name.
    public init(parsing s: String) {
        if s == "cuff-user" {
            self = .cuffUser
        } else if let bar = s.firstIndex(of: "|"), bar != s.startIndex, s.index(after: bar) != s.endIndex {
            self = .identifier(system: String(s[..<bar]), value: String(s[s.index(after: bar)...]))
        } else if FHIRSubject.isReference(s) {
            self = .reference(s)
        } else {
            self = .display(s)
        }
    }

    /// Why `s` cannot be a subject (nil when it can): a FHIR string is never empty, so an empty
    /// or blank value would make every Observation invalid.
    public static func problem(in s: String) -> String? {
        if s.allSatisfy(\.isWhitespace) {
            return "give a subject (cuff-user, Type/id, SYSTEM|VALUE or a display name), not an empty value"
        }
        // (Probe E3: `Foo/bar` was written as the reference, valid JSON but no FHIR R4 Observation.)
        if isReference(s), let type = s.split(separator: "/").first, !subjectTypes.contains(String(type)) {
            return
                "'\(s)': an Observation's subject is a \(subjectTypes.joined(separator: ", ")) (e.g. Patient/123), not a \(type)"
        }
        return nil
    }

    /// The resource types FHIR R4 allows as `Observation.subject`.
    public static let subjectTypes = ["Patient", "Group", "Device", "Location"]

    /// `Type/id` with a FHIR resource type name and a FHIR id (`[A-Za-z0-9\-\.]{1,64}`).
    static func isReference(_ s: String) -> Bool {
        let parts = s.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let t = parts[0].first, t.isASCII, t.isUppercase,
            parts[0].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }),
            (1...64).contains(parts[1].count),
            parts[1].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") })
        else { return false }
        return true
    }

    func json(for m: MeasurementRecord) -> JSON {
        switch self {
        case .cuffUser:
            let user = m.userID.flatMap { $0 == 0xFF ? nil : String($0) }
            return .object([
                (
                    "identifier",
                    .object([
                        ("system", .string("urn:cuff:cuff-user")),
                        ("value", .string(m.device.identity + "|user:" + (user ?? "-"))),
                    ])
                ),
                (
                    "display",
                    .string((user.map { "cuff user " + $0 } ?? "unknown cuff user") + " on " + m.device.humanName)
                ),
            ])
        case let .reference(r): return .object([("reference", .string(r))])
        case let .display(d): return .object([("display", .string(d))])
        case let .identifier(s, v):
            return .object([("identifier", .object([("system", .string(s)), ("value", .string(v))]))])
        }
    }
}

/// `--format fhir`: one FHIR R4 resource per line.
///
/// Each measurement gives an Observation on the vital-signs `bp` profile (LOINC 85354-9 + MDC
/// 150020; components systolic 8480-6/150021, diastolic 8462-4/150022, mean 8478-0/150023, in
/// `mm[Hg]`, kPa converted), then, when the record has a pulse rate, an Observation on the
/// `heartrate` profile (8867-4/149546, `/min`). A special SFLOAT becomes a `dataAbsentReason`,
/// never a number. Session and progress records produce nothing.
///
/// Choices the spec left open:
/// * `identifier`: `urn:cuff:dedup-key` | the record's dedup key (`|bp` / `|hr` appended), so a
///   receiver can drop retransmissions.
/// * `device`: a logical Reference — identifier `urn:cuff:device` | `serial:…` or `address:…`
///   (``DeviceInfo/identity``), display "Manufacturer Model (serial S, address)".
/// * `effectiveDateTime`: see ``EffectiveTime/of(_:offset:)`` (device time with the host's offset
///   at ingest, a BPS 1.1 UTC time stamp, or `received_at`).
public final class FHIRSink: SampleSink, Sendable {
    public let output: any LineOutput
    public let subject: FHIRSubject
    public let utcOffset: UTCOffsetPolicy
    private let done = FinishGuard("fhir")

    public init(output: any LineOutput, subject: FHIRSubject = .cuffUser, utcOffset: UTCOffsetPolicy = .system) {
        self.output = output
        self.subject = subject
        self.utcOffset = utcOffset
    }

    public func write(_ o: SessionOutput) throws(SinkError) {
        try done.check()
        guard case let .measurement(m) = o else { return }
        for r in resources(for: m) { try output.writeLine(r.serialized()) }
        try output.flush()
    }

    public func finish() throws(SinkError) {
        try done.finish()
        try output.flush()
    }

    /// The Observations for one measurement: blood pressure, then heart rate when there is a pulse rate.
    public func resources(for m: MeasurementRecord) -> [JSON] {
        FHIRSink.resources(for: m, subject: subject, utcOffset: utcOffset)
    }

    public static func resources(
        for m: MeasurementRecord, subject: FHIRSubject = .cuffUser, utcOffset: UTCOffsetPolicy = .system
    ) -> [JSON] {
        let effective = EffectiveTime.of(m, offset: utcOffset)
        let subjectJSON = subject.json(for: m)
        let device = JSON.object([
            ("identifier", .object([("system", .string("urn:cuff:device")), ("value", .string(m.device.identity))])),
            ("display", .string(m.device.humanName)),
        ])
        func head(profile: String, idSuffix: String) -> [(String, JSON)] {
            [
                ("resourceType", .string("Observation")),
                (
                    "meta",
                    .object([("profile", .array([.string("http://hl7.org/fhir/StructureDefinition/" + profile)]))])
                ),
                (
                    "identifier",
                    .array([
                        .object([
                            ("system", .string("urn:cuff:dedup-key")), ("value", .string(m.dedupKey + "|" + idSuffix)),
                        ])
                    ])
                ),
                ("status", .string("final")),
                (
                    "category",
                    .array([
                        .object([
                            (
                                "coding",
                                .array([
                                    .object([
                                        (
                                            "system",
                                            .string("http://terminology.hl7.org/CodeSystem/observation-category")
                                        ),
                                        ("code", .string("vital-signs")), ("display", .string("Vital Signs")),
                                    ])
                                ])
                            )
                        ])
                    ])
                ),
            ]
        }
        var bp = head(profile: "bp", idSuffix: "bp")
        bp.append(
            (
                "code",
                code(
                    loinc: "85354-9", "Blood pressure panel with all children optional", mdc: "150020",
                    "MDC_PRESS_BLD_NONINV")
            ))
        bp.append(("subject", subjectJSON))
        bp.append(("effectiveDateTime", .string(effective.rfc3339)))
        bp.append(("device", device))
        var components = [
            component(
                code(loinc: "8480-6", "Systolic blood pressure", mdc: "150021", "MDC_PRESS_BLD_NONINV_SYS"),
                m.systolic, m.unit),
            component(
                code(loinc: "8462-4", "Diastolic blood pressure", mdc: "150022", "MDC_PRESS_BLD_NONINV_DIA"),
                m.diastolic, m.unit),
        ]
        // A MAP the cuff never measures has no component (the panel's children are optional); a
        // NaN it sent this time keeps its dataAbsentReason.
        if !m.meanArterialPressureAbsent {
            components.append(
                component(
                    code(loinc: "8478-0", "Mean blood pressure", mdc: "150023", "MDC_PRESS_BLD_NONINV_MEAN"),
                    m.meanArterialPressure, m.unit))
        }
        bp.append(("component", .array(components)))
        var out = [JSON.object(bp)]
        if let pulse = m.pulseRate {
            var hr = head(profile: "heartrate", idSuffix: "hr")
            hr.append(("code", code(loinc: "8867-4", "Heart rate", mdc: "149546", "MDC_PULS_RATE_NON_INV")))
            hr.append(("subject", subjectJSON))
            hr.append(("effectiveDateTime", .string(effective.rfc3339)))
            hr.append(("device", device))
            hr += valueOrAbsent(pulse.doubleValue.map { quantity($0, unit: "beats/minute", code: "/min") }, pulse)
            out.append(.object(hr))
        }
        return out
    }

    static func code(loinc: String, _ loincDisplay: String, mdc: String, _ mdcDisplay: String) -> JSON {
        .object([
            (
                "coding",
                .array([
                    .object([
                        ("system", .string("http://loinc.org")), ("code", .string(loinc)),
                        ("display", .string(loincDisplay)),
                    ]),
                    .object([
                        ("system", .string("urn:iso:std:iso:11073:10101")), ("code", .string(mdc)),
                        ("display", .string(mdcDisplay)),
                    ]),
                ])
            )
        ])
    }

    static func quantity(_ v: Double, unit: String, code: String) -> JSON {
        .object([
            ("value", .double(v)), ("unit", .string(unit)), ("system", .string("http://unitsofmeasure.org")),
            ("code", .string(code)),
        ])
    }

    static func component(_ code: JSON, _ v: SFloat, _ unit: PressureUnit) -> JSON {
        .object(
            [("code", code)]
                + valueOrAbsent(ClinicalValue.mmHg(v, unit: unit).map { quantity($0, unit: "mmHg", code: "mm[Hg]") }, v)
        )
    }

    /// `valueQuantity`, or `dataAbsentReason` for a special value.
    static func valueOrAbsent(_ q: JSON?, _ v: SFloat) -> [(String, JSON)] {
        if let q { return [("valueQuantity", q)] }
        let reason = ClinicalValue.dataAbsentReason(v) ?? "error"
        return [
            (
                "dataAbsentReason",
                .object([
                    (
                        "coding",
                        .array([
                            .object([
                                ("system", .string("http://terminology.hl7.org/CodeSystem/data-absent-reason")),
                                ("code", .string(reason)),
                            ])
                        ])
                    ),
                    ("text", .string(v.specialName ?? "unknown")),
                ])
            )
        ]
    }
}
