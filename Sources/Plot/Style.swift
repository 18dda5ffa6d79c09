// SPDX-License-Identifier: GPL-2.0-or-later

/// Colours, fonts and sizes shared by the charts.
///
/// Colours are the Okabe–Ito palette (Okabe & Ito, "Color Universal Design", 2008), which stays
/// distinguishable for the common forms of colour blindness. Every series also differs by marker
/// shape or dash pattern, so a chart printed in grey still reads.
public enum Style {
    public static let fontFamily = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
    public static let fontSize = 12.0
    public static let ink = "#000000"
    public static let grid = "#D9D9D9"
    public static let axis = "#4D4D4D"
    public static let muted = "#555555"

    // Okabe–Ito.
    public static let orange = "#E69F00"
    public static let skyBlue = "#56B4E9"
    public static let bluishGreen = "#009E73"
    public static let yellow = "#F0E442"
    public static let blue = "#0072B2"
    public static let vermillion = "#D55E00"
    public static let reddishPurple = "#CC79A7"

    /// Light fills for the blood-pressure category bands, lowest category first: lightness falls
    /// steadily, so the order reads in grey too (and each band is named in the legend).
    /// (Relative luminance 0.95, 0.86, 0.84, 0.74, 0.63, 0.51, 0.41.)
    public static let bandFills = ["#F7F9FB", "#E9F0F5", "#F8ECC4", "#F7DCAE", "#F5C79B", "#F0AF8E", "#E79786"]

    /// Rough advance width of `s` at `size` in a sans-serif face (DejaVu Sans is among the wider
    /// ones; 0.62 em per character errs on the side of room). Used to keep labels apart.
    public static func textWidth(_ s: String, size: Double = fontSize) -> Double {
        Double(s.count) * size * 0.62
    }
}
