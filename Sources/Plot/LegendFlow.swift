// SPDX-License-Identifier: GPL-2.0-or-later

/// Legend entries laid out left to right, a new row (18 below) when the next would pass `right`.
struct LegendFlow {
    let left: Double
    let right: Double
    private(set) var x: Double
    var y: Double
    var elements: [SVGElement] = []

    init(left: Double, right: Double, y: Double) {
        self.left = left
        self.right = right
        self.x = left
        self.y = y
    }

    /// Where an entry `width` wide goes: on this row, or at the start of the next when it would pass
    /// `right`; the row moves on past it.
    mutating func place(width: Double) -> (x: Double, y: Double) {
        if x + width > right { x = left; y += 18 }
        defer { x += width }
        return (x, y)
    }

    /// A key drawn by `draw` at (x, y − 4), its label 28 to the right.
    mutating func key(_ label: String, _ draw: (Double, Double) -> SVGElement) {
        let (x, y) = place(width: Style.textWidth(label, size: 12) + 40)
        elements.append(draw(x, y - 4))
        elements.append(SVG.text(label, x: x + 28, y: y, size: 12, classes: "legend-label"))
    }

    /// Starts a new line `distance` below this one, at the left.
    mutating func newLine(below distance: Double) {
        x = left
        y += distance
    }
}
