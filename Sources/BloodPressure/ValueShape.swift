// SPDX-License-Identifier: GPL-2.0-or-later

/// Which Blood Pressure Service characteristic a value's bytes look like, for a value that came
/// on a handle nothing maps (a capture without service discovery). Only a hint for the user: a
/// value is never decoded by its shape.
///
/// A value looks like a characteristic when it decodes as one exactly — no error, no warning, no
/// byte left over — and its numbers are ones a cuff can send (pressures and pulse 0–300, or a
/// special value: 0–300 in kPa too, for the cuffs that flag kPa and send mmHg). Several may fit; the one a cuff sends most often on that
/// kind of message wins. A Record Access Control Point response is recognised as such: it holds
/// no reading.
public enum ValueShape {
    /// The characteristic `bytes` look like, sent as an indication or a notification; nil when
    /// they look like none (or are a Blood Pressure Record segment other than a first one).
    public static func characteristic(of bytes: ArraySlice<UInt8>, indication: Bool) -> CuffCharacteristic? {
        if indication {
            if classic(bytes) { return .bloodPressureMeasurement }
            if enhanced(bytes, cuffPressure: false) { return .enhancedBloodPressureMeasurement }
            if recordFirstSegment(bytes) { return .bloodPressureRecord }
            if controlPointResponse(bytes) { return .recordAccessControlPoint }
        } else {
            if classic(bytes) { return .intermediateCuffPressure }
            if enhanced(bytes, cuffPressure: true) { return .enhancedIntermediateCuffPressure }
            // (Some cuffs notify their results: the enhanced result's shape differs from the
            // enhanced cuff pressure's, and a record is never notified.)
            if enhanced(bytes, cuffPressure: false) { return .enhancedBloodPressureMeasurement }
        }
        return nil
    }

    /// A pressure or pulse a cuff can send: a special value, or 0–300.
    static func plausible(_ p: SFloat?) -> Bool {
        guard let v = p?.doubleValue else { return true }
        return v >= 0 && v <= 300
    }

    /// Blood Pressure Measurement (0x2A35) and Intermediate Cuff Pressure (0x2A36): one format.
    static func classic(_ bytes: ArraySlice<UInt8>) -> Bool {
        // (Values are judged here by ``plausible(_:)``, 0–300 whatever the unit: a kPa flag over
        // mmHg values is still this layout.)
        guard let d = try? BloodPressureMeasurement.decode(bytes), d.warnings.allSatisfy(\.isAboutValues) else {
            return false
        }
        let m = d.value
        return plausible(m.systolic) && plausible(m.diastolic) && plausible(m.meanArterialPressure)
            && plausible(m.pulseRate)
    }

    /// Enhanced Blood Pressure Measurement (0x2B34), or its cuff-pressure form (0x2B35).
    static func enhanced(_ bytes: ArraySlice<UInt8>, cuffPressure: Bool) -> Bool {
        guard let d = try? EnhancedBloodPressureMeasurement.decode(bytes, cuffPressure: cuffPressure),
            d.warnings.allSatisfy(\.isAboutValues)
        else { return false }
        let m = d.value
        guard plausible(m.pulseRate) else { return false }
        switch m.kind {
        case let .measurement(s, dia, map): return plausible(s) && plausible(dia) && plausible(map)
        case let .cuffPressure(p): return plausible(p)
        }
    }

    /// A Blood Pressure Record's (0x2B36) first segment: its header, a sequence number, and the
    /// UUID of a characteristic a record holds.
    static func recordFirstSegment(_ bytes: ArraySlice<UInt8>) -> Bool {
        guard let f = try? RecordSegment.decodeFields(bytes), f.segment.isFirst, let uuid = f.recordedUUID,
            !f.recordedData.isEmpty
        else { return false }
        return [
            BPSCharacteristic.enhancedBloodPressureMeasurement.rawValue,
            BPSCharacteristic.enhancedIntermediateCuffPressure.rawValue,
            BPSCharacteristic.bloodPressureMeasurement.rawValue,
        ].contains(uuid)
    }

    /// A Record Access Control Point (0x2A52) response, as ``RecordAccessControlPoint`` decodes
    /// one: a count of 1, 2 or 4 bytes, or a Response Code, with the Null operator.
    static func controlPointResponse(_ bytes: ArraySlice<UInt8>) -> Bool {
        guard let d = try? RecordAccessControlPoint.decode(bytes, as: .response) else { return false }
        return d.warnings.isEmpty
    }
}
