// SPDX-License-Identifier: GPL-2.0-or-later

/// Two uppercase hex digits.
func hex2(_ v: UInt8) -> String {
    let s = String(v, radix: 16, uppercase: true)
    return s.count < 2 ? "0" + s : s
}

/// `0x` and four uppercase hex digits, the way handles are written in the spec.
func hex4(_ v: UInt16) -> String {
    let s = String(v, radix: 16, uppercase: true)
    return "0x" + String(repeating: "0", count: 4 - s.count) + s
}
