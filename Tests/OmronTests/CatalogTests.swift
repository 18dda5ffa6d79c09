import Testing
@testable import Omron

@Suite("Omron model catalog")
struct CatalogTests {
    /// The 40 profiles of facts sheet §5.1, and the two omblepy readings of §5.2.
    static let sheetProfiles = [
        "HEM-6320T", "HEM-6321T", "HEM-6401T", "HEM-6410T", "HEM-7320T", "HEM-7322T", "HEM-7511T", "HEM-8732T",
        "HEM-8732K",
        "HEM-7600T", "HEM-7325T", "HEM-9601T", "HEM-9700T", "HEM-6232T", "HEM-7530T", "HEM-6161T", "HEM-7136T",
        "HEM-6231T",
        "HEM-6231T_Z", "HEM-1026T2", "HEM-7150T", "HEM-7153JT", "HEM-7157T", "HEM-7151T", "HEM-7155T", "HEM-7342T",
        "HEM-7361T", "HEM-7155T-MW", "HEM-7155T-K4", "HEM-7155T-MW3", "HEM-7146T", "HEM-716BT2", "HEM-7142T2",
        "HEM-7188T1",
        "HEM-7191T1", "HEM-7196T1", "HEM-7380T1", "HEM-7376T1", "HEM-7377T1", "HEM-7386T1", "HEM-7380T1-OB",
        "HEM-7377T1-OB",
    ]

    @Test func everySheetProfileIsThereOnce() {
        #expect(OmronCatalog.profiles.map(\.id) == Self.sheetProfiles)
    }

    @Test(arguments: OmronCatalog.profiles)
    func profileIsConsistent(p: OmronProfile) {
        #expect(p.index.cursorOffsets.count == p.users.count)
        #expect(p.index.unreadOffsets.count == p.users.count)
        for o in p.index.cursorOffsets + p.index.unreadOffsets { #expect(o + p.index.entryWidth <= p.index.size) }
        // User areas do not overlap each other or the settings areas.
        let areas = p.users.map { Int($0.start)..<Int($0.start) + $0.records * p.slotSize }
        let settings = [
            Int(p.settingsRead)..<Int(p.settingsRead) + p.settingsLength,
            Int(p.settingsWrite)..<Int(p.settingsWrite) + p.settingsLength,
        ]
        for (i, a) in areas.enumerated() {
            for (j, b) in areas.enumerated() where i != j { #expect(!a.overlaps(b)) }
            for s in settings { #expect(!a.overlaps(s), "\(p.id) user \(i + 1) area overlaps settings") }
        }
        #expect(p.slotSize >= p.layout.minimumLength)
        #expect([0x10, 0x2C, 0x38].contains(p.block))
        #expect(p.block + 8 <= OmronFrame.maxLength)
        // The pairing variant follows the transport (§1.2 point 4).
        #expect((p.transport == .classic) == (p.pairing == .customKey))
        #expect(OmronCatalog.profile(named: p.id) == p)
        for a in p.aliases { #expect(OmronCatalog.profile(named: a) == p, "\(a)") }
    }

    @Test func lookupIgnoresCaseSeparatorsAndRegionalSuffixes() throws {
        #expect(OmronCatalog.profile(named: "hem-7361t")?.id == "HEM-7361T")
        // HEM-7361T_ESL is one of HEM-7342T's equivalent ids (same map as HEM-7361T).
        #expect(OmronCatalog.profile(named: "HEM-7361T-ESL")?.id == "HEM-7342T")
        #expect(OmronCatalog.profile(named: "HEM-7361T-XYZ9")?.id == "HEM-7361T")
        #expect(OmronCatalog.profile(named: "hem_7155t_esl1")?.id == "HEM-7155T-MW3")
        #expect(OmronCatalog.profile(named: "HEM-7155T_ESL")?.id == "HEM-7155T")
        #expect(OmronCatalog.profile(named: "HEM-7155T-K4")?.id == "HEM-7155T-K4")
        #expect(OmronCatalog.profile(named: "HEM-7155T_K4-ESL")?.id == "HEM-7155T-K4")
        #expect(OmronCatalog.profile(named: "HEM-7144T2")?.id == "HEM-7146T")
        #expect(OmronCatalog.profile(named: "HEM-7140T1")?.id == "HEM-7142T2")
        #expect(OmronCatalog.profile(named: "HEM-7382T1-AZAZ")?.id == "HEM-7386T1")
        #expect(OmronCatalog.profile(named: "evolv")?.id == "HEM-7600T")
        #expect(OmronCatalog.profile(named: "X2+ Connect")?.id == "HEM-7188T1")
        #expect(OmronCatalog.profile(named: "M7 Intelli IT")?.id == "HEM-7361T")
        #expect(OmronCatalog.profile(named: "BP4350")?.id == "HEM-6232T")
        #expect(OmronCatalog.profile(advertisedName: "Omron HEM-7600T-E")?.id == "HEM-7600T")
        #expect(OmronCatalog.profile(advertisedName: "BLESmart_000000BCF95D33C7649F") == nil)
        #expect(throws: OmronError(.unknownModel, field: "'HEM-7999T'", offset: 0)) {
            try OmronCatalog.lookup("HEM-7999T")
        }
        do { _ = try OmronCatalog.lookup("HEM-7999T") } catch {
            #expect(error.detail.contains("closest profile: HEM-7"))
        }
    }

    @Test func readPlansFollowTheUnreadCounters() {
        let p = OmronCatalog.profile(named: "HEM-7361T")!
        // Next slot 10, 4 unread: slots 6..9.
        #expect(
            OmronReadPlan.unread(profile: p, user: 0, entry: OmronIndexEntry(cursor: 10, unread: 4)) == [
                OmronSlotRun(user: 0, slot: 6, count: 4)
            ])
        // Next slot 2, 5 unread: slots 97..99 then 0..1 (§7.2's two ranges, oldest first).
        #expect(
            OmronReadPlan.unread(profile: p, user: 1, entry: OmronIndexEntry(cursor: 0x4002, unread: 5))
                == [OmronSlotRun(user: 1, slot: 97, count: 3), OmronSlotRun(user: 1, slot: 0, count: 2)])
        #expect(OmronReadPlan.unread(profile: p, user: 0, entry: .empty).isEmpty)
        #expect(OmronReadPlan.unread(profile: p, user: 0, entry: OmronIndexEntry(cursor: 10, unread: 0x8000)).isEmpty)
        // Reads never exceed a block and cover exactly the slots.
        for q in OmronCatalog.profiles {
            let reads = OmronReadPlan.reads(profile: q, runs: OmronReadPlan.all(profile: q, user: 0))
            #expect(reads.allSatisfy { $0.count <= q.block })
            #expect(reads.map(\.count).reduce(0, +) == q.users[0].records * q.slotSize)
        }
    }

    /// The profile for what a cuff names, in the family discovery found.
    @Test func choiceRespectsTheFamilyFound() throws {
        let p = { (n: String) in OmronCatalog.profile(named: n)! }
        #expect(OmronCatalog.choose(name: "X4 Smart", transport: .classic) == .known(p("HEM-7155T")))
        #expect(
            OmronCatalog.choose(name: "X4 Smart", transport: .modern)
                == .sibling(p("HEM-7155T-MW3"), named: p("HEM-7155T")))
        #expect(OmronCatalog.choose(name: "HEM-7155T_ESL1", transport: .modern) == .known(p("HEM-7155T-MW3")))
        #expect(OmronCatalog.choose(name: nil, transport: .modern) == .defaulted(p("HEM-7142T2")))
        #expect(OmronCatalog.choose(name: "", transport: .classic) == .defaulted(p("HEM-7361T")))
        let other = OmronCatalog.choose(name: "HEM-7600T", transport: .modern)
        #expect(other.profile.transport == .modern)
        #expect(other == .otherFamily(other.profile, named: p("HEM-7600T")))
        #expect(OmronCatalog.choose(name: "HEM-7380T5", transport: .modern) == .unknown(closest: p("HEM-7380T1")))
        #expect(OmronCatalog.choose(name: "HEM-7380T5", transport: .classic).profile.transport == .classic)
    }
}
