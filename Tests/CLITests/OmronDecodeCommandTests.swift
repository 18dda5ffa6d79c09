import Foundation
import Testing

@Suite("cuff decode --model (Omron memory records)")
struct OmronDecodeCommandTests {
    /// hass-omron's real HEM-7142T2 slot and the values its log printed; an empty slot; a short one.
    @Test func decodesRecordsOfTheModelsLayout() throws {
        let r = try CLI.run([
            "decode", "--model", "hem-7142t2", "6558541a331ade1800004c00ba00", String(repeating: "ff", count: 14),
            "6558",
        ])
        #expect(r.status == 1)
        let lines = r.stdoutLines
        #expect(lines.count == 3)
        #expect(
            lines.first
                == #"{"type":"measurement","characteristic":"omron","unit":"mmHg","systolic":126.0,"diastolic":88.0,"mean_arterial_pressure":null,"pulse_rate":84.0,"timestamp":"2026-06-17T19:35:30","user_id":null,"status":{"body_movement":false,"cuff_too_loose":false,"irregular_pulse":false,"improper_position":false,"battery_low":false},"omron":{"model":"HEM-7142T2","layout":"le14","slot":null,"position":0,"sequence":76},"warnings":[],"raw":"6558541a331ade1800004c00ba00"}"#
        )
        #expect(lines[1].contains(#""code":"empty_record""#))
        #expect(lines[2].contains(#""code":"truncated""#) && lines[2].contains(#""offset":2"#))
        #expect(r.stderr.contains("input 2") && r.stderr.contains("input 3"))
    }

    /// Aliases, regional suffixes and case all reach the profile; the bit-packed layout of a real HEM-7600T-E slot.
    @Test func aliasesAndRegionalSuffixes() throws {
        let r = try CLI.run(["decode", "--model", "HEM-7600T-E", "5b781a4819d71b42000014006996"])
        #expect(r.status == 0)
        #expect(
            r.stdout.contains(#""systolic":145.0,"diastolic":91.0"#)
                && r.stdout.contains(#""timestamp":"2026-06-14T23:45:02""#))
        let s = try CLI.run(["decode", "--model", "HEM-7361T-ESL", "6b54421967ac491a8000070000000000"])
        #expect(s.status == 0)
        #expect(s.stdout.contains(#""timestamp":"2025-11-03T07:41:09""#) && s.stdout.contains(#""body_movement":true"#))
        let u = try CLI.run(["decode", "--model", "HEM-7999T", "00"])
        #expect(u.status == 64)
        #expect(u.stderr.contains("unknown Omron model") && u.stderr.contains("closest profile"))
    }
}
