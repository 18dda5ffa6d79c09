// SPDX-License-Identifier: GPL-2.0-or-later

/// The little trigonometry the simulator needs, without importing the C library into pure targets.
public enum PureMath {
    /// sin(x), accurate to about 1e-9 (range reduction to [−π/2, π/2], then an odd Taylor polynomial).
    public static func sin(_ x: Double) -> Double {
        guard x.isFinite else { return .nan }
        let twoPi = 2 * Double.pi
        var r = x - twoPi * (x / twoPi).rounded()
        // r in [−π, π]; fold into [−π/2, π/2] using sin(π − r) = sin(r).
        if r > Double.pi / 2 { r = Double.pi - r } else if r < -Double.pi / 2 { r = -Double.pi - r }
        let r2 = r * r
        var term = r
        var sum = r
        for n in stride(from: 2, through: 22, by: 2) {
            term *= -r2 / Double(n * (n + 1))
            sum += term
        }
        return sum
    }
}
