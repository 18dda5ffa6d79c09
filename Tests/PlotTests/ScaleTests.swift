// SPDX-License-Identifier: GPL-2.0-or-later
import Plot
import Testing

@Suite struct ScaleTests {
    @Test(arguments: [
        (0.7, 1.0), (1.0, 1.0), (1.3, 2.0), (2.2, 2.5), (3.0, 5.0), (7.0, 10.0), (12.0, 20.0), (0.031, 0.05),
        (260.0, 500.0),
    ])
    func niceSteps(_ raw: Double, _ step: Double) {
        #expect(abs(Ticks.niceStep(raw) - step) < 1e-12)
    }

    @Test func niceDomainWidensToWholeSteps() {
        let (lo, hi) = Ticks.niceDomain(3, 187, count: 6)
        #expect(lo == 0)
        #expect(hi == 200)
    }

    @Test func tickLabelsNeverOverlap() {
        // 0…200 mmHg on 100 px with 30 px labels: steps must be at least 40 px apart (30 + gap 10).
        let s = LinearScale(domain: 0, 200, pixels: 0, 100)
        let ticks = Ticks.linear(s, minGap: 10) { _ in 30 }
        #expect(ticks.count >= 2)
        for (a, b) in zip(ticks, ticks.dropFirst()) { #expect(s(b) - s(a) >= 40) }
        // With room to spare the step is small.
        let wide = LinearScale(domain: 0, 200, pixels: 0, 1000)
        let many = Ticks.linear(wide, minGap: 10) { _ in 30 }
        #expect(many.count >= 10)
        #expect(many.first == 0 && many.last == 200)
    }

    /// A domain from -1.7e308 to 1.7e308 has an infinite span: the step came out as 1 and the tick
    /// loop, adding 1 to -1.7e308 (which leaves it unchanged), appended until memory ran out.
    @Test(arguments: [
        (-1.7e308, 1.7e308), (0.0, Double.greatestFiniteMagnitude), (1e300, 1e300 * 1.0000001), (1e17, 1e17 + 64),
        (-Double.greatestFiniteMagnitude, -1e308),
    ])
    func domainsNoStepCanDivideGetAtMostTheirEnds(_ lo: Double, _ hi: Double) {
        let ticks = Ticks.linear(LinearScale(domain: lo, hi, pixels: 400, 0), minGap: 6) { _ in 12 }
        #expect(ticks.count <= 100)
        #expect(ticks.allSatisfy { $0.isFinite })
    }

    @Test func tickValuesAreBounded() {
        // A step far too small for the domain stops at the limit instead of running on.
        #expect(Ticks.linear(LinearScale(domain: 0, 1e9, pixels: 0, 1e12), minGap: 1) { _ in 1 }.count <= 10_000)
    }

    @Test func tickLabelsUseTheDecimalsTheStepNeeds() {
        #expect(Ticks.label(2.5, step: 0.5) == "2.5")
        #expect(Ticks.label(20, step: 10) == "20")
        #expect(Ticks.label(0.25, step: 0.25) == "0.25")
    }

    @Test func labelsAreMovedApartOrDropped() throws {
        let placed = LabelLayout.place([50, 52, 51, 200], size: 10, gap: 2, lower: 0, upper: 210)
        let ys = placed.compactMap { $0 }.sorted()
        #expect(ys.count == 4)
        for (a, b) in zip(ys, ys.dropFirst()) { #expect(b - a >= 12) }
        // No room for three labels of 10 px in 25 px: one is dropped, none overlap.
        let crowded = LabelLayout.place([10, 10, 10], size: 10, gap: 2, lower: 0, upper: 25)
        #expect(crowded.compactMap { $0 }.count == 2)
    }

    @Test func scaleMapsBothWays() {
        let y = LinearScale(domain: 0, 200, pixels: 300, 100)
        #expect(y(0) == 300)
        #expect(y(200) == 100)
        #expect(y(100) == 200)
    }

    @Test func civilDates() {
        #expect(CivilTime.days(year: 1970, month: 1, day: 1) == 0)
        #expect(CivilTime.days(year: 2000, month: 3, day: 1) == 11_017)
        for d in [-800_000, -1, 0, 59, 11_016, 20_000, 20_779, 2_932_896] {
            let c = CivilTime.date(days: d)
            #expect(CivilTime.days(year: c.year, month: c.month, day: c.day) == d)
        }
        #expect(CivilTime.weekday(days: 0) == 4)  // Thursday
        let nov22 = CivilTime.days(year: 2026, month: 11, day: 22)
        #expect(CivilTime.weekday(days: nov22) == 7)
        #expect(CivilTime.isoWeek(days: nov22) == (2026, 47))
        #expect(CivilTime.isoWeek(days: CivilTime.days(year: 2021, month: 1, day: 3)) == (2020, 53))
        #expect(CivilTime.isoWeek(days: CivilTime.days(year: 2024, month: 12, day: 30)) == (2025, 1))
        #expect(CivilTime.weekStart(days: nov22) == CivilTime.days(year: 2026, month: 11, day: 16))
    }

    @Test func timeTextParses() throws {
        let t = try #require(CivilTime.seconds("2026-11-22T08:13:21.261Z"))
        #expect(abs(t - 1_795_335_201.261) < 1e-6)
        #expect(CivilTime.seconds("2026-11-22T08:13:21") == 1_795_335_201)
        #expect(CivilTime.seconds("2026-11-22") == 1_795_305_600)
        #expect(CivilTime.seconds("2026-11-22T09:13:21+01:00") == 1_795_335_201)
        for bad in ["", "2026-13-01", "2026-11-22T", "yesterday", "2026-11-22T08:13:21Zjunk", "2026-11-22T08:13:21."] {
            #expect(CivilTime.seconds(bad) == nil, "\(bad)")
        }
        #expect(CivilTime.dateTimeText(1_795_335_201, seconds: true) == "2026-11-22 08:13:21")
    }

    @Test func guidelineCategories() {
        let esc = Guideline.escEsh2018, acc = Guideline.accAha2017
        #expect(esc.category(systolic: 119, diastolic: 79) == "optimal")
        #expect(esc.category(systolic: 119, diastolic: 80) == "normal")
        #expect(esc.category(systolic: 139, diastolic: 70) == "high normal")
        #expect(esc.category(systolic: 150, diastolic: 112) == "grade 3 hypertension")
        #expect(acc.category(systolic: 125, diastolic: 79) == "elevated")
        #expect(acc.category(systolic: 125, diastolic: 85) == "stage 1 hypertension")
        #expect(acc.category(systolic: 118, diastolic: 92) == "stage 2 hypertension")
        #expect(esc.systolic.map(\.rangeText) == ["<120", "120–129", "130–139", "140–159", "160–179", "≥180"])
        #expect(esc.diastolic.map(\.rangeText) == ["<80", "80–84", "85–89", "90–99", "100–109", "≥110"])
        #expect(acc.systolic.map(\.rangeText) == ["<120", "120–129", "130–139", "≥140"])
        #expect(acc.diastolic.map(\.rangeText) == ["<80", "80–89", "≥90"])
        #expect(Guideline.named("ACC-AHA-2017") == acc)
        #expect(Guideline.default == esc)
    }
}
