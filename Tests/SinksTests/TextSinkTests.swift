// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import CuffCore
import CuffSession
import Foundation
import Testing

@testable import Sinks

let session = SessionOutput.session(SessionRecord(event: .start, device: Vectors.device, at: Vectors.at))
let progress = SessionOutput.progress(
    ProgressRecord(
        phase: .inflating, cuffPressure: SFloat(rawValue: 0x0064), unit: .mmHg, elapsed: 1.25, at: Vectors.at))

@Suite struct NDJSONSinkTests {
    @Test func everyOutputIsItsJSONLineFlushedBeforeWriteReturns() throws {
        let out = MemoryOutput()
        let sink = NDJSONSink(output: out)
        let m = try Vectors.bpm(Vectors.mmHgFull)
        let outputs: [SessionOutput] = [session, progress, .measurement(m)]
        for (n, o) in outputs.enumerated() {
            try sink.write(o)
            #expect(out.pendingLines.isEmpty)
            #expect(out.lines.count == n + 1)
        }
        #expect(out.lines == outputs.map { $0.json.serialized() })
        let parsed = try parseLines(out.lines)
        #expect(parsed[2]["type"] as? String == "measurement")
        #expect(parsed[2]["raw"] as? String == Hex.encode(try Vectors.bytes(Vectors.mmHgFull)))
    }

    @Test func writeAfterFinishThrows() throws {
        let sink = NDJSONSink(output: MemoryOutput())
        try sink.finish()
        #expect(throws: SinkError.finished(sink: "ndjson")) { try sink.write(session) }
        #expect(throws: SinkError.finished(sink: "ndjson")) { try sink.finish() }
    }
}

@Suite struct LineOutputTests {
    @Test func fileDescriptorOutputDeliversLinesOnFlushOnly() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let out = FileDescriptorOutput(fd: fds[1], name: "pipe")
        try out.writeLine("{\"a\":1}")
        try out.writeLine("é")
        var flags = fcntl(fds[0], F_GETFL)
        flags |= O_NONBLOCK
        _ = fcntl(fds[0], F_SETFL, flags)
        var buf = [UInt8](repeating: 0, count: 64)
        #expect(read(fds[0], &buf, 64) == -1)  // nothing yet
        try out.flush()
        close(fds[1])
        let n = read(fds[0], &buf, 64)
        #expect(String(decoding: buf[0..<max(0, n)], as: UTF8.self) == "{\"a\":1}\né\n")
    }

    @Test func writeFailureNamesTheDestinationAndErrno() throws {
        // (-1, never a descriptor: a closed pipe's number can be reused at once by a test running
        // beside this one, which then got this test's bytes.)
        let out = FileDescriptorOutput(fd: -1, name: "closed pipe")
        try out.writeLine("x")
        #expect(throws: SinkError.writeFailed(destination: "closed pipe", errno: EBADF)) { try out.flush() }
    }
}

@Suite struct TimeAndIDTests {
    @Test func offsets() {
        #expect(EffectiveTime.formatOffset(7200) == "+02:00")
        #expect(EffectiveTime.formatOffset(-19800) == "-05:30")
        #expect(EffectiveTime.formatOffset(0) == "+00:00")
        #expect(EffectiveTime.formatOffset(20700) == "+05:45")
    }

    @Test func effectiveTimeBasis() throws {
        let local = try Vectors.bpm(Vectors.withDateTime)
        let e = EffectiveTime.of(local, offset: .fixed(7200))
        #expect(e == EffectiveTime(rfc3339: "2024-06-23T14:35:10+02:00", basis: .deviceLocalAssumedHostOffset))
        // Year 0 in the Date Time: no usable device time, so the reception time.
        let unknown = try Vectors.bpm(Vectors.mmHgFull)
        #expect(unknown.timestamp == nil)
        #expect(
            EffectiveTime.of(unknown, offset: .fixed(7200))
                == EffectiveTime(rfc3339: "2026-11-22T07:31:54.123Z", basis: .hostReceive))
        let enhanced = try Vectors.enhancedRecord()
        #expect(
            EffectiveTime.of(enhanced, offset: .fixed(7200))
                == EffectiveTime(rfc3339: "2000-01-02T00:00:00Z", basis: .utcEnhanced))
    }

    @Test func impossibleDeviceDatesFallBackToReception() throws {
        // 2023-02-29: the codec gives no timestamp, so FHIR / Open mHealth use the reception time.
        let m = try Vectors.bpm("1E 78 00 50 00 5D 00 E7 07 02 1D 0E 23 0A 48 00 01 00 00")
        #expect(m.timestamp == nil)
        #expect(m.warnings.map(\.code) == [.invalidDateTime])
        #expect(
            EffectiveTime.of(m, offset: .fixed(7200))
                == EffectiveTime(rfc3339: "2026-11-22T07:31:54.123Z", basis: .hostReceive))
        // A store written before the calendar check may hold such a text: it is not a time either.
        for text in ["2023-02-29T14:35:10", "2024-04-31T14:35:10", "9999-02-31T14:35:10"] {
            var old = try Vectors.bpm(Vectors.withDateTime)
            old.timestamp = text
            #expect(EffectiveTime.of(old, offset: .fixed(7200)).basis == .hostReceive, "\(text)")
            #expect(UTCOffsetPolicy.hostUTCOffset(atLocalDateTime: text) == nil)
        }
        var leap = try Vectors.bpm(Vectors.withDateTime)
        leap.timestamp = "2024-02-29T14:35:10"
        #expect(
            EffectiveTime.of(leap, offset: .fixed(7200))
                == EffectiveTime(rfc3339: "2024-02-29T14:35:10+02:00", basis: .deviceLocalAssumedHostOffset))
    }

    @Test func uuidsAreVersion4AndSeedable() {
        let a = UUIDGenerator.seeded(7), b = UUIDGenerator.seeded(7), c = UUIDGenerator.seeded(8)
        let ids = (0..<50).map { _ in a.make() }
        #expect(ids == (0..<50).map { _ in b.make() })
        #expect(Set(ids).count == 50)
        #expect(ids[0] != c.make())
        let sys = UUIDGenerator.system()
        for id in ids + [sys.make(), sys.make()] {
            let u = Array(id)
            #expect(u.count == 36)
            #expect(u[8] == "-" && u[13] == "-" && u[18] == "-" && u[23] == "-")
            #expect(u[14] == "4")
            #expect("89ab".contains(u[19]))
            #expect(id == id.lowercased())
        }
    }
}

@Suite struct ConversionTests {
    @Test(arguments: [
        (0xF0BD as UInt16, 141.8),  // 18.9 kPa
        (0x000B, 82.5),  // 11 kPa
        (0xF09F, 119.3),  // 15.9 kPa
        (0x0010, 120.0),  // 16 kPa = 120.0099
        (0xF001, 0.8),  // 0.1 kPa = 0.75
    ])
    func kPaToMmHgRoundedToOneDecimal(word: UInt16, mmHg: Double) {
        #expect(ClinicalValue.mmHg(SFloat(rawValue: word), unit: .kPa) == mmHg)
    }

    @Test func mmHgPassesThroughAndSpecialsHaveNoNumber() {
        #expect(ClinicalValue.mmHg(SFloat(rawValue: 0x008A), unit: .mmHg) == 138)
        for s in [SFloat.nan, .nres, .positiveInfinity, .negativeInfinity, .reserved] {
            #expect(ClinicalValue.mmHg(s, unit: .mmHg) == nil)
            #expect(ClinicalValue.mmHg(s, unit: .kPa) == nil)
        }
        #expect(ClinicalValue.dataAbsentReason(.nan) == "not-a-number")
        #expect(ClinicalValue.dataAbsentReason(.nres) == "error")
        #expect(ClinicalValue.dataAbsentReason(.positiveInfinity) == "positive-infinity")
        #expect(ClinicalValue.dataAbsentReason(.negativeInfinity) == "negative-infinity")
        #expect(ClinicalValue.dataAbsentReason(.reserved) == "error")
        #expect(ClinicalValue.dataAbsentReason(SFloat(rawValue: 0x0078)) == nil)
    }
}

@Suite struct FHIRSinkTests {
    func run(_ outputs: [SessionOutput], subject: FHIRSubject = .cuffUser) throws -> [String] {
        let out = MemoryOutput()
        let sink = FHIRSink(output: out, subject: subject, utcOffset: .fixed(7200))
        for o in outputs { try sink.write(o) }
        try sink.finish()
        return out.lines
    }

    func component(_ obs: [String: Any], _ loinc: String) -> [String: Any]? {
        obs.arr("component")?.first { codings($0.obj("code")).contains("http://loinc.org|" + loinc) }
    }

    @Test func bloodPressureAndHeartRateObservations() throws {
        let lines = try run([session, progress, .measurement(try Vectors.bpm(Vectors.mmHgFull))])
        #expect(lines.count == 2)  // session and progress produce nothing
        let (bp, hr) = try { () throws -> ([String: Any], [String: Any]) in
            let p = try parseLines(lines); return (p[0], p[1])
        }()
        #expect(bp["resourceType"] as? String == "Observation")
        #expect((bp.obj("meta")?["profile"] as? [String]) == ["http://hl7.org/fhir/StructureDefinition/bp"])
        #expect(bp["status"] as? String == "final")
        #expect(
            codings(bp.arr("category")?.first) == [
                "http://terminology.hl7.org/CodeSystem/observation-category|vital-signs"
            ])
        #expect(codings(bp.obj("code")) == ["http://loinc.org|85354-9", "urn:iso:std:iso:11073:10101|150020"])
        #expect(bp["effectiveDateTime"] as? String == "2026-11-22T07:31:54.123Z")
        #expect(bp.obj("subject")?.obj("identifier")?["value"] as? String == "serial:SN42|user:1")
        #expect(bp.obj("device")?.obj("identifier")?["value"] as? String == "serial:SN42")
        #expect(bp.obj("device")?["display"] as? String == "Acme M7 (serial SN42, AA:BB:CC:DD:EE:FF)")
        for (loinc, mdc, value) in [
            ("8480-6", "150021", 138.0), ("8462-4", "150022", 88.0), ("8478-0", "150023", 120.0),
        ] {
            let c = component(bp, loinc)
            let cc = codings(c?.obj("code"))
            #expect(cc.contains("urn:iso:std:iso:11073:10101|" + mdc))
            let q = c?.obj("valueQuantity")
            #expect(q?["value"] as? Double == value)
            #expect(q?["unit"] as? String == "mmHg")
            #expect(q?["system"] as? String == "http://unitsofmeasure.org")
            #expect(q?["code"] as? String == "mm[Hg]")
        }
        #expect((bp.obj("meta")?["profile"] as? [String]) == ["http://hl7.org/fhir/StructureDefinition/bp"])
        #expect((hr.obj("meta")?["profile"] as? [String]) == ["http://hl7.org/fhir/StructureDefinition/heartrate"])
        #expect(codings(hr.obj("code")) == ["http://loinc.org|8867-4", "urn:iso:std:iso:11073:10101|149546"])
        #expect(hr.obj("valueQuantity")?["value"] as? Double == 60)
        #expect(hr.obj("valueQuantity")?["code"] as? String == "/min")
        #expect(hr["effectiveDateTime"] as? String == "2026-11-22T07:31:54.123Z")
        try #require(try validate("fhir", lines)?.0 == 0)
    }

    @Test func deviceTimeGetsTheHostOffsetAndEnhancedStaysUTC() throws {
        let lines = try run([
            .measurement(try Vectors.bpm(Vectors.withDateTime)), .measurement(try Vectors.enhancedRecord()),
        ])
        let p = try parseLines(lines)
        #expect(p.count == 4)
        #expect(p[0]["effectiveDateTime"] as? String == "2024-06-23T14:35:10+02:00")
        #expect(p[1]["effectiveDateTime"] as? String == "2024-06-23T14:35:10+02:00")
        #expect(p[2]["effectiveDateTime"] as? String == "2000-01-02T00:00:00Z")
        #expect(p[2].obj("subject")?.obj("identifier")?["value"] as? String == "serial:SN42|user:5")
        #expect(component(p[2], "8478-0")?.obj("valueQuantity")?["value"] as? Double == 100)
        #expect(p[3].obj("valueQuantity")?["value"] as? Double == 72)
        try #require(try validate("fhir", lines)?.0 == 0)
    }

    @Test func kPaIsConvertedToMmHg() throws {
        let lines = try run([.measurement(try Vectors.bpm(Vectors.kPa))])
        let bp = try parseLines(lines)[0]
        #expect(component(bp, "8480-6")?.obj("valueQuantity")?["value"] as? Double == 141.8)
        #expect(component(bp, "8462-4")?.obj("valueQuantity")?["value"] as? Double == 82.5)
        #expect(component(bp, "8478-0")?.obj("valueQuantity")?["value"] as? Double == 119.3)
        #expect(!lines[0].contains("kPa") && !lines[0].contains("18.9"))
        try #require(try validate("fhir", lines)?.0 == 0)
    }

    @Test func errorFrameBecomesDataAbsentReasonNeverANumber() throws {
        let lines = try run([.measurement(try Vectors.bpm(Vectors.errorFrame))])
        #expect(lines.count == 2)  // the pulse is present (as NaN), so heart rate says why it is absent
        let p = try parseLines(lines)
        for loinc in ["8480-6", "8462-4", "8478-0"] {
            let c = try #require(component(p[0], loinc))
            #expect(c["valueQuantity"] == nil)
            #expect(
                codings(c.obj("dataAbsentReason")) == [
                    "http://terminology.hl7.org/CodeSystem/data-absent-reason|not-a-number"
                ])
        }
        #expect(p[1]["valueQuantity"] == nil)
        #expect(
            codings(p[1].obj("dataAbsentReason")) == [
                "http://terminology.hl7.org/CodeSystem/data-absent-reason|not-a-number"
            ])
        for l in lines {
            #expect(l.range(of: "\"value\":[-0-9]", options: .regularExpression) == nil)
            #expect(!l.contains("valueQuantity"))
        }
        try #require(try validate("fhir", lines)?.0 == 0)
    }

    /// A MAP the cuff never measures (Veroval's placeholder 0, a vendor protocol's null) has no
    /// component; one it sent as NaN this time keeps its dataAbsentReason (above).
    @Test func aMAPTheCuffNeverMeasuresHasNoComponent() throws {
        let veroval = try Vectors.bpm(
            "1E 7B 00 50 00 00 00 E8 07 03 0F 08 1E 00 48 00 01 01 80", quirks: QuirkProfile.veroval.options)
        var vendor = try Vectors.bpm(Vectors.withDateTime)
        vendor.decoded = .object([("type", .string("measurement")), ("mean_arterial_pressure", .null)])
        vendor.meanArterialPressure = .nan
        for m in [veroval, vendor] {
            #expect(m.meanArterialPressureAbsent)
            let lines = try run([.measurement(m)])
            let bp = try parseLines(lines)[0]
            #expect(component(bp, "8478-0") == nil)
            #expect(component(bp, "8480-6")?.obj("valueQuantity")?["value"] as? Double != nil)
            #expect(!lines[0].contains("not-a-number"))
            try #require(try validate("fhir", lines)?.0 == 0)
        }
        #expect(try !Vectors.bpm(Vectors.withDateTime).meanArterialPressureAbsent)
    }

    @Test(arguments: [
        (SFloat.nres, "error"), (.positiveInfinity, "positive-infinity"), (.negativeInfinity, "negative-infinity"),
        (.reserved, "error"), (.nan, "not-a-number"),
    ])
    func eachSpecialValueHasItsReason(special: SFloat, reason: String) throws {
        let m = try Vectors.withWords(
            sys: special, dia: SFloat(rawValue: 80), map: SFloat(rawValue: 93), pulse: special)
        let lines = try run([.measurement(m)])
        let p = try parseLines(lines)
        #expect(
            codings(component(p[0], "8480-6")?.obj("dataAbsentReason")) == [
                "http://terminology.hl7.org/CodeSystem/data-absent-reason|" + reason
            ])
        #expect(component(p[0], "8462-4")?.obj("valueQuantity")?["value"] as? Double == 80)
        #expect(
            codings(p[1].obj("dataAbsentReason")) == [
                "http://terminology.hl7.org/CodeSystem/data-absent-reason|" + reason
            ])
        try #require(try validate("fhir", lines)?.0 == 0)
    }

    @Test func noPulseNoHeartRateObservation() throws {
        let lines = try run([.measurement(try Vectors.withWords(sys: SFloat(rawValue: 120), dia: SFloat(rawValue: 80)))]
        )
        #expect(lines.count == 1)
    }

    @Test func subjectChoices() throws {
        let m = try Vectors.bpm(Vectors.kPa)
        #expect(
            try parseLines(try run([.measurement(m)], subject: .reference("Patient/7")))[0].obj("subject")?["reference"]
                as? String == "Patient/7")
        #expect(
            try parseLines(try run([.measurement(m)], subject: .display("Jane")))[0].obj("subject")?["display"]
                as? String == "Jane")
        let lines = try run([.measurement(m)], subject: .identifier(system: "urn:oid:1.2.3", value: "p1"))
        #expect(try parseLines(lines)[0].obj("subject")?.obj("identifier")?["value"] as? String == "p1")
        // No user ID in the kPa vector.
        let def = try parseLines(try run([.measurement(m)]))[0].obj("subject")
        #expect(def?.obj("identifier")?["value"] as? String == "serial:SN42|user:-")
        try #require(try validate("fhir", lines)?.0 == 0)
    }

    @Test func subjectFromTheCommandLine() {
        #expect(FHIRSubject(parsing: "cuff-user") == .cuffUser)
        #expect(FHIRSubject(parsing: "Patient/123") == .reference("Patient/123"))
        #expect(FHIRSubject(parsing: "Patient/a.b-c") == .reference("Patient/a.b-c"))
        #expect(FHIRSubject(parsing: "urn:oid:1.2.3|p-9") == .identifier(system: "urn:oid:1.2.3", value: "p-9"))
        #expect(FHIRSubject(parsing: "Jane Doe") == .display("Jane Doe"))
        #expect(FHIRSubject(parsing: "patient/1") == .display("patient/1"))
        #expect(FHIRSubject(parsing: "Patient/") == .display("Patient/"))
        #expect(FHIRSubject(parsing: "|x") == .display("|x"))
    }

    @Test func theValidatorRejectsABrokenObservation() throws {
        // Proves validation above can fail: a status outside the required binding.
        var line = try run([.measurement(try Vectors.bpm(Vectors.kPa))])[0]
        line = line.replacingOccurrences(of: "\"status\":\"final\"", with: "\"status\":\"done\"")
        let r = try validate("fhir", [line])
        if let r { #expect(r.0 == 1) }
    }
}

@Suite struct OMHSinkTests {
    func run(_ outputs: [SessionOutput], seed: UInt64 = 1) throws -> ([String], [SinkWarning]) {
        let out = MemoryOutput()
        let w = WarningCollector()
        let sink = OMHSink(
            output: out, ids: .seeded(seed), clock: .fixed(Vectors.receivedMicros + 5_000_000),
            utcOffset: .fixed(-18000), warn: w.handler)
        for o in outputs { try sink.write(o) }
        try sink.finish()
        return (out.lines, w.warnings)
    }

    @Test func bloodPressureAndHeartRateDataPoints() throws {
        let (lines, warnings) = try run([session, progress, .measurement(try Vectors.bpm(Vectors.mmHgFull))])
        #expect(warnings.isEmpty)
        let p = try parseLines(lines)
        #expect(p.count == 2)
        let h0 = try #require(p[0].obj("header")), h1 = try #require(p[1].obj("header"))
        #expect(h0.obj("schema_id")?["name"] as? String == "blood-pressure")
        #expect(h0.obj("schema_id")?["version"] as? String == "4.0")
        #expect(h0.obj("schema_id")?["namespace"] as? String == "omh")
        #expect(h1.obj("schema_id")?["name"] as? String == "heart-rate")
        #expect(h1.obj("schema_id")?["version"] as? String == "2.0")
        #expect(h0["creation_date_time"] as? String == "2026-11-22T07:31:59.123Z")
        #expect(h0.obj("acquisition_provenance")?["modality"] as? String == "sensed")
        #expect(
            h0.obj("acquisition_provenance")?["source_name"] as? String
                == "BLE BPM Acme M7 (serial SN42, AA:BB:CC:DD:EE:FF)")
        #expect(h0["id"] as? String != h1["id"] as? String)
        let ids = UUIDGenerator.seeded(1)
        #expect(h0["id"] as? String == ids.make())
        let b0 = try #require(p[0].obj("body"))
        #expect(b0.obj("systolic_blood_pressure")?["value"] as? Double == 138)
        #expect(b0.obj("systolic_blood_pressure")?["unit"] as? String == "mmHg")
        #expect(b0.obj("diastolic_blood_pressure")?["value"] as? Double == 88)
        #expect(b0.count == 3)  // no MAP, status or user slot
        #expect(b0.obj("effective_time_frame")?["date_time"] as? String == "2026-11-22T07:31:54.123Z")
        let b1 = try #require(p[1].obj("body"))
        #expect(b1.obj("heart_rate")?["value"] as? Double == 60)
        #expect(b1.obj("heart_rate")?["unit"] as? String == "beats/min")
        try #require(try validate("omh", lines)?.0 == 0)
    }

    @Test func kPaConvertedAndLocalTimeOffset() throws {
        let (lines, _) = try run([
            .measurement(try Vectors.bpm(Vectors.kPa)), .measurement(try Vectors.bpm(Vectors.withDateTime)),
        ])
        let p = try parseLines(lines)
        #expect(p.count == 4)
        #expect(p[0].obj("body")?.obj("systolic_blood_pressure")?["value"] as? Double == 141.8)
        #expect(p[0].obj("body")?.obj("diastolic_blood_pressure")?["value"] as? Double == 82.5)
        #expect(p[2].obj("body")?.obj("effective_time_frame")?["date_time"] as? String == "2024-06-23T14:35:10-05:00")
        try #require(try validate("omh", lines)?.0 == 0)
    }

    @Test func errorFrameGivesNoDataPointsAndWarns() throws {
        let (lines, warnings) = try run([.measurement(try Vectors.bpm(Vectors.errorFrame))])
        #expect(lines.isEmpty)
        #expect(warnings.count == 2)
        #expect(warnings.allSatisfy { $0.sink == "omh" && $0.dedupKey != nil })
        #expect(warnings[0].message.contains("blood-pressure") && warnings[0].message.contains("NaN"))
        #expect(warnings[1].message.contains("heart-rate"))
    }

    @Test func specialPulseDropsOnlyHeartRate() throws {
        let m = try Vectors.withWords(sys: SFloat(rawValue: 120), dia: SFloat(rawValue: 80), pulse: .positiveInfinity)
        let (lines, warnings) = try run([.measurement(m)])
        #expect(lines.count == 1)
        #expect(warnings.count == 1)
        #expect(!lines[0].contains("INF"))
        try #require(try validate("omh", lines)?.0 == 0)
    }

    @Test func specialDiastolicDropsBloodPressureOnly() throws {
        let m = try Vectors.withWords(sys: SFloat(rawValue: 120), dia: .nres, pulse: SFloat(rawValue: 70))
        let (lines, warnings) = try run([.measurement(m)])
        #expect(lines.count == 1)
        #expect(try parseLines(lines)[0].obj("body")?.obj("heart_rate")?["value"] as? Double == 70)
        #expect(warnings.count == 1 && warnings[0].message.contains("NRes"))
    }

    @Test func theValidatorRejectsABadUnit() throws {
        var (lines, _) = try run([.measurement(try Vectors.bpm(Vectors.kPa))])
        lines[0] = lines[0].replacingOccurrences(of: "\"mmHg\"", with: "\"mmH\"")
        let r = try validate("omh", [lines[0]])
        if let r { #expect(r.0 == 1) }
    }
}

/// `received_at` for any wall time a replay can hand over: the line buffer and EventTime agree,
/// and neither overflows at the ends of the 64-bit range.
@Suite("Wall times at the ends of the range")
struct ExtremeWallTimeTests {
    @Test func lineBufferAndEventTimeAgreeAtTheEnds() {
        for micros: Int64 in [.min, .min + 1, -62_135_596_800_000_001, -1, 0, 1_795_330_917_123_456, .max - 1, .max] {
            let at = EventTime(monotonic: .zero, wallMicros: micros)
            let lines = NDJSONLineBuffer()
            lines.append(
                .progress(
                    ProgressRecord(
                        phase: .inflating, cuffPressure: SFloat(rawValue: 0x0064), unit: .mmHg, elapsed: 0, at: at)))
            let text = String(decoding: lines.bytes, as: UTF8.self)
            #expect(text.contains("\"received_at\":\"\(at.iso8601)\""), "\(micros): \(text)")
        }
        #expect(EventTime.iso8601(wallMicros: 1_795_330_917_123_456) == "2026-11-22T07:01:57.123Z")
        #expect(EventTime.iso8601(wallMicros: -1) == "1969-12-31T23:59:59.999Z")
        #expect(DateTime(unixSeconds: .min).description.count > 0)
    }
}
