// SPDX-License-Identifier: GPL-2.0-or-later

/// Every model profile of the facts sheet (§5.1, hass-omron's catalog at d6758ed, plus the two
/// omblepy readings of §5.2 that disagree with it), and lookup by id, alias or sales name.
public enum OmronCatalog {
    public static let profiles: [OmronProfile] = [
        row(
            "HEM-6320T", .classic, .customKey, nil, .le14, .big, 14, [(0x0370, 100)], 0x2C, 0x0F74, 0x0F9A, 0..<8, 8,
            (0x14, .at2), "transcribed (vendor map); layout suspect, facts sheet §10 #1",
            ["HEM-6320T-SH", "HEM-6320T-Z", "HEM-6322T-SH", "HEM-6323T", "HEM-6325T"]),
        row(
            "HEM-6321T", .classic, .customKey, nil, .le14, .big, 14, [(0x0370, 100), (0x08E8, 100)], 0x2C, 0x0F74,
            0x0F9A,
            0..<8, 8, (0x14, .at2), "transcribed (vendor map); layout suspect, facts sheet §10 #1",
            ["HEM-6321T-Z", "HEM-6324T"]),
        row(
            "HEM-6401T", .classic, .customKey, nil, .hem6401, .big, 16, [(0x1350, 100)], 0x10, 0x0100, 0x0160, nil,
            0x10,
            (0x10, .at0), "transcribed (vendor map)", ["HEM-6401T-Z", "HEM-6402T-Z"],
            index: (cursor: [6], unread: [0xE]), mask: 0x3FFF, bias: 0),
        row(
            "HEM-6410T", .classic, .customKey, nil, .hem6401, .big, 32, [(0x5590, 100)], 0x10, 0x0100, 0x0170, nil,
            0x10,
            (0x10, .at0), "transcribed (vendor map)",
            ["HEM-6410T-Z", "HEM-6410T-Z_BP", "HEM-6410T-Z_BP+EV", "HEM-6411T-MAE"],
            index: (cursor: [6], unread: [0xE]), mask: 0x3FFF, bias: 0),
        row(
            "HEM-7320T", .classic, .customKey, nil, .le14, .big, 14, [(0x02AC, 60), (0x05F4, 60)], 0x2C, 0x0260, 0x0286,
            0..<8, 8, (0x14, .at2), "hass-omron README (under the old bit-packed parser, §10 #1); layout suspect",
            ["HEM-7320T-CA", "HEM-7320T-CACS", "HEM-7320T-ZV", "HEM-7320T_TI-CA", "HEM-7320T_TI-Z", "HEM-8725T-WM"],
            sales: ["BP7450", "BF769CAN"]),
        row(
            "HEM-7322T", .classic, .customKey, "WLB1.0", .be14, .big, 14, [(0x02AC, 100), (0x0824, 100)], 0x2C, 0x0260,
            0x0286,
            0..<8, 8, (0x14, .at2Swapped),
            "hass-omron README, omblepy matrix, hass-omron #13 log; HEM-7280T capture (omblepy #57)",
            [
                "HEM-7321T-CA", "HEM-7321T_TI-CA", "HEM-7321T_TI-Z", "HEM-7280T-AP", "HEM-7280T-D", "HEM-7280T-E",
                "HEM-7280T_TI-D", "HEM-7280T_TI-E", "HEM-7281T", "HEM-7282T", "HEM-7321T-ZV", "HEM-7322T-D",
                "HEM-7322T-E",
                "HEM-7280T",
            ],
            sales: ["BP786", "M6 Intelli IT", "M700 Intelli IT"]),
        row(
            "HEM-7511T", .classic, .customKey, "WLB1.0", .be14, .big, 14, [(0x02AC, 90), (0x0798, 90)], 0x2C, 0x0260,
            0x0286,
            0..<8, 8, (0x14, .at2Swapped), "transcribed (vendor map)", []),
        row(
            "HEM-8732T", .classic, .customKey, "WLB1.0", .be14, .big, 14, [(0x02AC, 60), (0x05F4, 60)], 0x2C, 0x0260,
            0x0286,
            0..<8, 8, (0x14, .at2Swapped), "transcribed (vendor map)", ["HEM-8732T-SH"]),
        row(
            "HEM-8732K", .classic, .customKey, "WLB1.0", .be14, .big, 14, [(0x02AC, 45), (0x0522, 45)], 0x2C, 0x0260,
            0x0286,
            0..<8, 8, (0x14, .at2Swapped), "transcribed (vendor map)", ["HEM-8732K-SH"]),
        row(
            "HEM-7600T", .classic, .customKey, nil, .be14, .big, 14, [(0x02AC, 100)], 0x2C, 0x0260, 0x0286, 0..<8, 8,
            (0x14, .at2Swapped),
            "hass-omron README and test (HEM-7600T-E record), omblepy matrix, hass-omron PR#75 clock",
            [
                "HEM-7270C", "HEM-7271T", "HEM-7600T-E", "HEM-7600T-Z", "HEM-7600T-ZCD6BK", "HEM-7600T-SH3BK",
                "HEM-7600T2-JF",
                "HEM-7600T_W", "HEM-7600T_W-SH3W", "HEM-7600T_W-Z",
            ],
            sales: ["BP7000", "Evolv"]),
        row(
            "HEM-7325T", .classic, .customKey, nil, .be14, .big, 14, [(0x02AC, 90)], 0x2C, 0x0260, 0x0286, 0..<8, 8,
            (0x14, .at2Swapped), "transcribed (vendor map)", []),
        row(
            "HEM-9601T", .classic, .customKey, "WLS3.0", .heartguide24, .big, 24, [(0x041A, 350)], 0x2C, 0x0356, 0x03B8,
            0..<0x14, 0x14, (0x50, .at2), "transcribed (vendor map)",
            ["HEM-9601T-J3", "HEM-9601T2-BR3", "HEM-9601T_E3"],
            mask: 0x3FFF, backtrack: 5, sales: ["HeartGuide"]),
        row(
            "HEM-9700T", .classic, .customKey, "WLS3.0", .heartguide24, .big, 24, [(0x041A, 1000)], 0x2C, 0x0356,
            0x03B8,
            0..<0x14, 0x14, (0x50, .at2), "transcribed (vendor map)", [], mask: 0x3FFF, backtrack: 5),
        row(
            "HEM-6232T", .classic, .customKey, nil, .be14y6, .big, 14, [(0x02E8, 100), (0x0860, 100)], 0x2C, 0x0260,
            0x02A4,
            0..<8, 0x10, (0x2C, .at8Swapped), "hass-omron README and #38 log, omblepy matrix, omblepy PR#72 (BP4350)",
            ["HEM-6232T-AP", "HEM-6232T-D", "HEM-6232T-E", "HEM-6232T-Z", "HEM-6233T"],
            sales: ["BP6350", "RS7 Intelli IT", "BP4350"]),
        row(
            "HEM-7530T", .classic, .customKey, nil, .be14, .big, 14, [(0x02E8, 90)], 0x10, 0x0260, 0x02A4, nil, 0x10,
            (0x2C, .at8Swapped), "hass-omron README, omblepy matrix (pair, read)",
            [
                "HEM-6231T2-JC", "HEM-6231T2-JE", "HEM-6231T2-JT3", "HEM-7271P-SH3", "HEM-7271T_SH3", "HEM-7530T-Z",
                "HEM-7530T1-BR3", "HEM-7530T_AP3", "HEM-7530T_E3", "HEM-7530T_J3", "HEM-7530T_JT3", "HEM-8630T-SH",
            ],
            sales: ["BP7900", "Complete"]),
        row(
            "HEM-6161T", .classic, .customKey, nil, .be14, .big, 14, [(0x02E8, 30)], 0x10, 0x0260, 0x02A4, nil, 0x10,
            (0x2C, .at8Swapped), "hass-omron README; omblepy #59 pairing",
            ["HEM-6161T-D", "HEM-6161T-E", "HEM-6161T-RU", "HEM-6161T2-BR", "HEM-7271L-SH3"],
            sales: ["RS2 Intelli IT", "RS3 IntelliIT"]),
        row(
            "HEM-7136T", .classic, .customKey, nil, .be14, .big, 14, [(0x02E8, 60)], 0x10, 0x0260, 0x02A4, nil, 0x10,
            (0x2C, .at8Swapped), "transcribed (vendor map)",
            ["HEM-7136T-SH3", "HEM-7138JT-SH", "HEM-7138T-SH", "HEM-7139T-SH3"]),
        row(
            "HEM-6231T", .classic, .customKey, nil, .be14, .big, 14, [(0x02E8, 100)], 0x10, 0x0260, 0x02A4, nil, 0x10,
            (0x2C, .at8Swapped), "transcribed (vendor map)", ["HEM-6231T-SH"]),
        row(
            "HEM-6231T_Z", .classic, .customKey, nil, .be14, .big, 14, [(0x02E8, 90)], 0x10, 0x0260, 0x02A4, nil, 0x10,
            (0x2C, .at8Swapped), "transcribed (vendor map)", []),
        row(
            "HEM-1026T2", .classic, .customKey, "WLD2.0", .le14, .little, 16, [(0x02E8, 100), (0x0928, 100)], 0x2C,
            0x0260,
            0x02A4, nil, 0x18, (0x2C, .at8), "transcribed (vendor map)",
            ["HEM-1026T2-AJC", "HEM-1026T2-AJE", "HEM-1026T2-AKA"]),
        row(
            "HEM-7150T", .classic, .customKey, nil, .le14, .little, 16, [(0x0098, 60)], 0x10, 0x0010, 0x0054, 0..<0x10,
            0x10,
            (0x2C, .at8), "omblepy matrix (pair, read)",
            [
                "HEM-7150T-CA", "HEM-7150T-Z", "HEM-7153T_ASH", "HEM-7156T-BR", "HEM-7156T-LA", "HEM-7156T_AAP",
                "HEM-7156T_AP",
            ],
            sales: ["BP7250"]),
        row(
            "HEM-7153JT", .classic, .customKey, nil, .le14, .little, 16, [(0x0098, 30)], 0x10, 0x0010, 0x0054, 0..<0x10,
            0x10,
            (0x2C, .at8), "transcribed (vendor map)", ["HEM-7153JT_ASH"]),
        row(
            "HEM-7157T", .classic, .customKey, nil, .le14, .little, 16, [(0x0098, 100)], 0x10, 0x0010, 0x0054, 0..<0x10,
            0x10,
            (0x2C, .at8), "transcribed (vendor map)", ["HEM-7157T-AP", "HEM-7158T-JC", "HEM-7158T_AP3"]),
        row(
            "HEM-7151T", .classic, .customKey, nil, .le14, .little, 16, [(0x0098, 80)], 0x10, 0x0010, 0x0054, 0..<0x10,
            0x10,
            (0x2C, .at8), "hass-omron README; omblepy #3 (key refused over an unbonded link)", ["HEM-7151T-Z"],
            sales: ["BP5250", "M3 Comfort"]),
        row(
            "HEM-7155T", .classic, .customKey, "WLS3.0", .le14, .little, 16, [(0x0098, 60), (0x0458, 60)], 0x10, 0x0010,
            0x0054,
            0..<0x10, 0x10, (0x2C, .at8), "hass-omron README and test (start reply), omblepy matrix (all four)",
            [
                "HEM-7155T-ALRU", "HEM-7155T-D", "HEM-7155T-EBK", "HEM-7155T-EBL", "HEM-7155T_AP", "HEM-7155T_ASH3BK",
                "HEM-7155T_ASH3SL", "HEM-7155T_ESL", "HEM-7340T-CA", "HEM-7340T-Z", "HEM-7341T-Z",
            ],
            sales: ["BP7350", "M4 Intelli IT", "M400", "M4", "X4 Smart"]),
        row(
            "HEM-7342T", .classic, .customKey, nil, .le14, .little, 16, [(0x0098, 100), (0x06D8, 100)], 0x10, 0x0010,
            0x0054,
            0..<0x10, 0x10, (0x2C, .at8), "hass-omron README (as HEM-7343T), omblepy matrix (pair, read)",
            [
                "HEM-7159T_AP3", "HEM-7342T-CA", "HEM-7342T-Z", "HEM-7342T1-ACACD6", "HEM-7343T", "HEM-7343T-Z",
                "HEM-7344JT_ASH3",
                "HEM-7344T_ASH3BK", "HEM-7344T_ASH3SL", "HEM-7346T-AJC3", "HEM-7346T-AJE3", "HEM-7346T2-AJC32",
                "HEM-7346T2-AJE32",
                "HEM-7346T_ABR3", "HEM-7346T_AP3", "HEM-7347T-AJC3", "HEM-7347T-AJE3", "HEM-7347T2-AJC32",
                "HEM-7347T2-AJE32",
                "HEM-7349T_ABR", "HEM-7361T-ALRU", "HEM-7361T-AP", "HEM-7361T-D", "HEM-7361T-EBK", "HEM-7361T1-BS",
                "HEM-7361T_ESL",
            ],
            sales: ["BP5450", "Platinum"]),
        row(
            "HEM-7361T", .classic, .customKey, nil, .le14, .little, 16, [(0x0098, 100), (0x06D8, 100)], 0x10, 0x0010,
            0x0054,
            0..<0x10, 0x10, (0x2C, .at8), "omblepy matrix (all four); omblepy #7 (clock offset)", [],
            sales: ["M500", "M7 Intelli IT"]),
        row(
            "HEM-7155T-MW", .modern, .bondOnly, "WLS3.0", .le14, .little, 16, [(0x0098, 60), (0x0458, 60)], 0x2C,
            0x0010, 0x0054,
            nil, 0x10, (0x2C, .at8), "transcribed (vendor map)", []),
        row(
            "HEM-7155T-K4", .modern, .bondOnly, "WLD2.0", .le14, .little, 16, [(0x02E8, 60), (0x06A8, 60)], 0x38,
            0x0260, 0x02A4,
            nil, 0x18, (0x2C, .at8), "transcribed (vendor map)",
            [
                "HEM-7155T_K4-D", "HEM-7155T_K4-EBK", "HEM-7155T_K4-ESL", "HEM-7340T_K4-CA", "HEM-7340T_K4-Z",
                "HEM-7341T_K4-Z",
            ]),
        row(
            "HEM-7155T-MW3", .modern, .token, "WLD3.0", .le14, .little, 16, [(0x02E8, 60), (0x06A8, 60)], 0x38, 0x0260,
            0x02A4,
            nil, 0x10, (0x2C, .at8), "hass-omron PR#81 (HCI capture: token, u32 index)", ["HEM-7155T_ESL1"],
            index: (cursor: [0, 8], unread: [4, 0xC]), width: 4, drops: true),
        row(
            "HEM-7146T", .modern, .bondOnly, "WLD1.0", .le14, .little, 14, [(0x02E8, 30)], 0x2C, 0x0260, 0x02A4, nil,
            0x10,
            (0x2C, .at8), "hass-omron README (HEM-7146T2), #71 records; omblepy #55 records (HEM-7144T2)",
            [
                "HEM-7143T1-AIN", "HEM-7143T1-AP", "HEM-7143T1-D", "HEM-7143T1-E", "HEM-7143T1_D", "HEM-7143T1_EBK",
                "HEM-7143T2-E",
                "HEM-7143T2_ESL", "HEM-7144T1-AU", "HEM-7144T2-BR", "HEM-7144T2-LA", "HEM-7146T2", "HEM-7146T2-EBK",
                "HEM-7146T2-ESL",
                "HEM-7146T2-JD", "HEM-7146T2-JF", "HEM-716DT2-LA", "HEM-7144T2",
            ],
            sales: ["X2 Smart+"]),
        row(
            "HEM-716BT2", .modern, .token, "WLD1.0", .le14, .little, 14, [(0x02E8, 30)], 0x2C, 0x0260, 0x02A4, nil,
            0x10,
            (0x2C, .at8), "hass-omron README", ["HEM-7149T2-E", "HEM-716BT2-ZAZ", "HEM-716CT2-Z"],
            sales: ["BP5255", "M4 Smart"]),
        row(
            "HEM-7142T2", .modern, .token, "WLD1.0", .le14, .little, 14, [(0x02E8, 14)], 0x2C, 0x0260, 0x02A4, nil,
            0x10,
            (0x2C, .at8), "hass-omron README and tests (records, clock); omblepy #39 capture (HEM-7140T1)",
            [
                "HEM-7138K-SH", "HEM-7140T1-AP", "HEM-7141T1-AP", "HEM-7142T1-AP", "HEM-7142T2-AP", "HEM-7142T2-Z",
                "HEM-7142T2-ZAZ",
                "HEM-7142T2_JAZ", "HEM-7140T1",
            ],
            sales: ["BP7150", "M2 Intelli IT"]),
        row(
            "HEM-7188T1", .modern, .token, "WLD4.0", .le14, .little, 16, [(0x01C4, 30)], 0x38, 0x0010, 0x0054, nil,
            0x18,
            (0x2C, .at8), "hass-omron #92 / PR#112 (HEM-7188T1-LEO: token read works)",
            [
                "HEM-7183T1-AP", "HEM-7183T1-CAP", "HEM-7183T1_FLBIN", "HEM-7183T1_FLIN", "HEM-7183T1_LAP",
                "HEM-7188T1-LE",
                "HEM-7188T1-LEO",
            ],
            drops: true, sales: ["X2+ Connect", "M2+"]),
        row(
            "HEM-7191T1", .modern, .token, "WLD4.0", .le14, .little, 16, [(0x01C4, 60)], 0x38, 0x0010, 0x0054, nil,
            0x18,
            (0x2C, .at8), "transcribed (vendor map)", ["HEM-7191T1-LZ"], drops: true,
            sales: ["M3 Comfort AFib", "X3 Comfort AFib"]),
        row(
            "HEM-7196T1", .modern, .token, "WLD4.0", .le14, .little, 16, [(0x01C4, 60), (0x0584, 60)], 0x38, 0x0010,
            0x0054,
            nil, 0x18, (0x2C, .at8), "transcribed (vendor map)",
            [
                "HEM-7194T1-FLAP", "HEM-7194T1-FLCAP", "HEM-7194T1_FLBIN", "HEM-7194T1_FLIN", "HEM-7196T1-FLE",
                "HEM-7196T1-FLEO",
            ],
            drops: true, sales: ["M4 Connect AFib", "X4 Connect AFib"]),
        row(
            "HEM-7380T1", .modern, .token, "WLD3.0", .le14, .little, 16, [(0x01C4, 100), (0x0804, 100)], 0x38, 0x0010,
            0x0054,
            nil, 0x18, (0x2C, .at8), "hass-omron PR#193 log (clock, cursor); omblepy PR#65 (HEM-7380T1-EOSL, read)",
            ["HEM-7380T", "HEM-7380T1-EBK", "HEM-7380T1-EOSL", "HEM-7383T1-AP", "HEM-7384T1-NBBR"], drops: true,
            sales: ["X7 Smart"]),
        row(
            "HEM-7376T1", .modern, .token, "WLD3.0", .le14, .little, 16, [(0x080C, 60), (0x0BCC, 60)], 0x38, 0x0010,
            0x0058,
            nil, 0x1C, (0x30, .at8), "transcribed (vendor map)",
            ["HEM-7376T1-ACACD6", "HEM-7376T1-Z", "HEM-7385T1-AJAZ3", "HEM-7387T1-AJAZ3", "HEM-7389T1-JM3"],
            drops: true, flag: 0x01),
        row(
            "HEM-7377T1", .modern, .token, "WLD3.0", .le14, .little, 16, [(0x080C, 80), (0x0D0C, 80)], 0x38, 0x0010,
            0x0058,
            nil, 0x1C, (0x30, .at8), "omblepy PR#69 (HEM-7377T1-ZAZ read, on another map: see HEM-7377T1-OB)",
            ["HEM-7377T1-ZAZ"],
            drops: true, flag: 0x01, sales: ["7 Series", "BP5360"]),
        row(
            "HEM-7386T1", .modern, .token, "WLD3.0", .le14, .little, 16, [(0x080C, 100), (0x0E4C, 100)], 0x38, 0x0010,
            0x0058,
            nil, 0x1C, (0x30, .at8), "hass-omron PR#94/#175 and #190 (HEM-7382T1-AZAZ clock, registration)",
            ["HEM-7381T1-AZ", "HEM-7382T1", "HEM-7382T1-AZAZ", "HEM-7386T1-AJF3", "HEM-7388T1-AJF3"], drops: true,
            flag: 0x01,
            sales: ["BP5465"]),
        // The two omblepy readings that arrived after its snapshot (§5.2 "later", §10 #9/#10): bond
        // only, their own memory maps. Index and settings as hass-omron has them (omblepy has none).
        row(
            "HEM-7380T1-OB", .modern, .bondOnly, "WLD3.0", .le14, .little, 16, [(0x01C4, 100), (0x0804, 100)], 0x10,
            0x0010,
            0x0054, nil, 0x18, (0x2C, .at8), "omblepy PR#65 (HEM-7380T1-EOSL read without unlock)", []),
        row(
            "HEM-7377T1-OB", .modern, .bondOnly, "WLD3.0", .le14, .little, 16, [(0x01CC, 100), (0x080C, 100)], 0x38,
            0x0010,
            0x0058, nil, 0x1C, (0x30, .at8), "omblepy PR#69 (BP5360: data at 0x080C, clock 0x0040/0x0088, flag 0x01)",
            [],
            flag: 0x01),
    ]

    // swiftlint:disable:next function_parameter_count
    private static func row(
        _ id: String, _ tr: OmronTransport, _ pairing: OmronPairing, _ connect: String?, _ layout: OmronRecordLayout,
        _ end: OmronByteOrder, _ slot: Int, _ users: [(UInt16, Int)], _ block: Int, _ read: UInt16, _ write: UInt16,
        _ unread: Range<Int>?, _ indexSize: Int, _ clock: (Int, OmronClockLayout), _ checked: String,
        _ aliases: [String],
        index: (cursor: [Int], unread: [Int])? = nil, width: Int = 2, mask: UInt32 = 0xFF, bias: Int = -1,
        backtrack: Int = 0,
        drops: Bool = false, flag: UInt8? = nil, sales: [String] = []
    ) -> OmronProfile {
        let offsets = index ?? (users.count == 1 ? ([0], [4]) : ([0, 2], [4, 6]))
        return OmronProfile(
            id: id, transport: tr, pairing: pairing, dropsBond: drops, connectType: connect, layout: layout,
            slotSize: slot,
            users: users.map { OmronUserArea(start: $0.0, records: $0.1) }, block: block, settingsRead: read,
            settingsWrite: write, unreadSection: unread,
            index: OmronIndexLayout(
                size: indexSize, cursorOffsets: offsets.cursor, unreadOffsets: offsets.unread, entryWidth: width,
                byteOrder: end,
                cursorMask: mask, bias: bias, backtrack: backtrack),
            clock: OmronClockWindow(offset: clock.0, layout: clock.1, flag: flag), aliases: aliases, salesNames: sales,
            checkedAgainst: checked)
    }

    /// `HEM-7361T_ESL` → `HEM7361TESL`: case, `-`, `_`, spaces and dots do not matter.
    static func key(_ s: String) -> String {
        String(s.uppercased().filter { $0.isLetter || $0.isNumber || $0 == "+" })
    }

    /// The model number without its regional suffix: `HEM-7361T-ESL` → `HEM7361T`, `HEM-7155T_K4-D` → `HEM7155T`.
    public static func base(_ s: String) -> String {
        let u = s.uppercased()
        guard u.hasPrefix("HEM") else { return key(s) }
        var out = "HEM"
        var rest = Substring(u.dropFirst(3))
        while let c = rest.first, c == "-" || c == "_" || c == " " { rest.removeFirst() }
        while let c = rest.first, c.isLetter || c.isNumber {
            out.append(c)
            rest.removeFirst()
        }
        return out
    }

    private static let byKey: [String: Int] = {
        var m: [String: Int] = [:]
        for (i, p) in profiles.enumerated() {
            for name in [p.id] + p.aliases + p.salesNames where m[key(name)] == nil { m[key(name)] = i }
        }
        return m
    }()

    private static let byBase: [String: Int] = {
        var m: [String: Int] = [:]
        // A profile's own id wins over another profile's alias with the same base.
        for (i, p) in profiles.enumerated() where m[base(p.id)] == nil { m[base(p.id)] = i }
        for (i, p) in profiles.enumerated() {
            for a in p.aliases where m[base(a)] == nil { m[base(a)] = i }
        }
        return m
    }()

    /// The profile for a model id, alias or sales name (case-insensitive; a regional suffix the
    /// catalog does not list falls back to the bare model number).
    public static func profile(named name: String) -> OmronProfile? {
        if let i = byKey[key(name)] { return profiles[i] }
        if let i = byBase[base(name)] { return profiles[i] }
        return nil
    }

    /// Like ``profile(named:)``, or an `unknown_model` error that names the closest profile.
    public static func lookup(_ name: String) throws(OmronError) -> OmronProfile {
        if let p = profile(named: name) { return p }
        throw OmronError(
            .unknownModel, field: "'\(name)'", offset: 0, detail: "closest profile: \(closest(to: name).id)")
    }

    /// The profile whose id is nearest `name` (most leading characters of the model number in
    /// common), among those of `transport` when given.
    public static func closest(to name: String, transport: OmronTransport? = nil) -> OmronProfile {
        let b = Array(base(name))
        let candidates = profiles.filter { transport == nil || $0.transport == transport }
        var best = candidates[0]
        var bestScore = -1
        for p in candidates {
            for n in [p.id] + p.aliases {
                let c = Array(base(n))
                var k = 0
                while k < min(b.count, c.count), b[k] == c[k] { k += 1 }
                if k > bestScore { best = p; bestScore = k }
            }
        }
        return best
    }

    /// Finds a `HEM-…` token in an advertised or GAP name.
    public static func profile(advertisedName: String) -> OmronProfile? {
        let u = Array(advertisedName.uppercased())
        guard u.count >= 3,
            let i = (0...u.count - 3).first(where: { u[$0] == "H" && u[$0 + 1] == "E" && u[$0 + 2] == "M" })
        else { return nil }
        let token = u[i...].prefix { $0.isLetter || $0.isNumber || "-_.".contains($0) }
        return profile(named: String(token))
    }

    /// The profile of each family used when the cuff names no model: hass-omron's fallback
    /// (HEM-7142T2) for FE4A, and for the classic service the M7 Intelli IT (HEM-7361T).
    public static func defaultProfile(_ transport: OmronTransport) -> OmronProfile {
        profile(named: transport == .modern ? "HEM-7142T2" : "HEM-7361T")!
    }

    /// The profile for a cuff whose discovery found `transport`'s service and which names itself
    /// `name` (Device Information's model number, or the model its advert showed; nil: none).
    public static func choose(name: String?, transport: OmronTransport) -> OmronProfileChoice {
        guard let name, !name.isEmpty else { return .defaulted(defaultProfile(transport)) }
        guard let named = profile(named: name) else {
            return .unknown(closest: closest(to: name, transport: transport))
        }
        if named.transport == transport { return .known(named) }
        // "X4 Smart" is HEM-7155T (classic) in the catalog, but a HEM-7155T_ESL1 says so too over
        // FE4A: a profile of the same model number in the family found, one backed by a real cuff first.
        let siblings = profiles.filter { $0.transport == transport && base($0.id) == base(named.id) }
        if let s = siblings.first(where: { !$0.checkedAgainst.hasPrefix("transcribed") }) ?? siblings.first {
            return .sibling(s, named: named)
        }
        return .otherFamily(closest(to: name, transport: transport), named: named)
    }
}

/// How ``OmronCatalog/choose(name:transport:)`` picked a profile for what the cuff showed.
public enum OmronProfileChoice: Sendable, Hashable {
    /// The name's own profile, of the family found.
    case known(OmronProfile)
    /// The name's profile is of the other family; this one has the same model number.
    case sibling(OmronProfile, named: OmronProfile)
    /// The name's profile is of the other family and none of this family shares its model
    /// number: the closest of the family found.
    case otherFamily(OmronProfile, named: OmronProfile)
    /// No profile knows the name: the closest of the family found.
    case unknown(closest: OmronProfile)
    /// No name: the family's default.
    case defaulted(OmronProfile)

    public var profile: OmronProfile {
        switch self {
        case let .known(p), let .sibling(p, _), let .otherFamily(p, _), let .unknown(p), let .defaulted(p): p
        }
    }
}
