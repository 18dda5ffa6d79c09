// SPDX-License-Identifier: GPL-2.0-or-later

enum TextWrap {
    /// Splits `s` into lines of at most `width` pixels at `size` (words kept whole; a word longer
    /// than a line stands alone).
    static func lines(_ s: String, width: Double, size: Double = Style.fontSize) -> [String] {
        var out: [String] = []
        var line = ""
        for word in s.split(separator: " ", omittingEmptySubsequences: true) {
            let candidate = line.isEmpty ? String(word) : line + " " + word
            if Style.textWidth(candidate, size: size) > width && !line.isEmpty {
                out.append(line)
                line = String(word)
            } else {
                line = candidate
            }
        }
        if !line.isEmpty { out.append(line) }
        return out
    }
}
