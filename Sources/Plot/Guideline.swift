// SPDX-License-Identifier: GPL-2.0-or-later

/// Blood-pressure categories of a published guideline, for office (clinic) readings in mmHg.
///
/// A reading's category is the higher of its systolic and its diastolic category. The bands are
/// drawn behind the history chart: systolic bands behind the systolic readings, diastolic bands
/// behind the diastolic ones.
public struct Guideline: Sendable, Hashable {
    public struct Band: Sendable, Hashable {
        public var category: String
        /// Inclusive lower bound (nil: no lower bound), exclusive upper bound (nil: none), mmHg.
        public var lower: Double?
        public var upper: Double?
        /// Index of the band's category in ``Guideline/categories`` (its colour, and its rank).
        public var level: Int

        public init(_ category: String, _ lower: Double?, _ upper: Double?, level: Int) {
            self.category = category
            self.lower = lower
            self.upper = upper
            self.level = level
        }

        /// `<120`, `120–129`, `≥180` (integer mmHg, as guidelines print them).
        public var rangeText: String {
            switch (lower, upper) {
            case let (nil, u?): "<" + SVGNumber.format(u)
            case let (l?, nil): "≥" + SVGNumber.format(l)
            case let (l?, u?): SVGNumber.format(l) + "–" + SVGNumber.format(u - 1)
            default: "all"
            }
        }

        public func contains(_ v: Double) -> Bool { (lower.map { v >= $0 } ?? true) && (upper.map { v < $0 } ?? true) }
    }

    public var id: String
    public var name: String
    public var source: String
    /// Categories from lowest to highest; `systolic[i]` and `diastolic[i]` belong to `categories[i]`.
    public var categories: [String]
    public var systolic: [Band]
    public var diastolic: [Band]

    /// ESC/ESH 2018, office blood pressure (Williams B, Mancia G, et al. 2018 ESC/ESH Guidelines for
    /// the management of arterial hypertension. Eur Heart J 2018;39:3021–3104, Table 3).
    public static let escEsh2018 = Guideline(
        id: "esc-esh-2018", name: "ESC/ESH 2018",
        source:
            "Williams et al., 2018 ESC/ESH Guidelines for the management of arterial hypertension, Eur Heart J 2018;39:3021–3104, Table 3",
        categories: [
            "optimal", "normal", "high normal", "grade 1 hypertension", "grade 2 hypertension", "grade 3 hypertension",
        ],
        systolic: [
            Band("optimal", nil, 120, level: 0), Band("normal", 120, 130, level: 1),
            Band("high normal", 130, 140, level: 2),
            Band("grade 1", 140, 160, level: 3), Band("grade 2", 160, 180, level: 4),
            Band("grade 3", 180, nil, level: 5),
        ],
        diastolic: [
            Band("optimal", nil, 80, level: 0), Band("normal", 80, 85, level: 1), Band("high normal", 85, 90, level: 2),
            Band("grade 1", 90, 100, level: 3), Band("grade 2", 100, 110, level: 4),
            Band("grade 3", 110, nil, level: 5),
        ])

    /// ACC/AHA 2017 (Whelton PK, Carey RM, et al. 2017 ACC/AHA/AAPA/ABC/ACPM/AGS/APhA/ASH/ASPC/NMA/PCNA
    /// Guideline for the Prevention, Detection, Evaluation, and Management of High Blood Pressure in
    /// Adults. Hypertension 2018;71:e13–e115, Table 6). Elevated is systolic 120–129 with diastolic
    /// <80, so on the diastolic axis normal and elevated share one band.
    public static let accAha2017 = Guideline(
        id: "acc-aha-2017", name: "ACC/AHA 2017",
        source:
            "Whelton et al., 2017 ACC/AHA Guideline for High Blood Pressure in Adults, Hypertension 2018;71:e13–e115, Table 6",
        categories: ["normal", "elevated", "stage 1 hypertension", "stage 2 hypertension"],
        systolic: [
            Band("normal", nil, 120, level: 0), Band("elevated", 120, 130, level: 1),
            Band("stage 1", 130, 140, level: 2),
            Band("stage 2", 140, nil, level: 3),
        ],
        diastolic: [
            Band("normal or elevated", nil, 80, level: 0), Band("stage 1", 80, 90, level: 2),
            Band("stage 2", 90, nil, level: 3),
        ])

    public static let all = [escEsh2018, accAha2017]
    public static let `default` = escEsh2018

    public static func named(_ id: String) -> Guideline? { all.first { $0.id == id.lowercased() } }

    /// The category of a reading: the higher of its systolic and diastolic categories.
    public func category(systolic s: Double, diastolic d: Double) -> String {
        let si = systolic.first { $0.contains(s) }?.level ?? 0
        let di = diastolic.first { $0.contains(d) }?.level ?? 0
        return categories[max(si, di)]
    }
}
