// SPDX-License-Identifier: GPL-2.0-or-later

/// Outbox rows a shipper (the MQTT publisher, the PostgreSQL drain) leaves where they are because
/// they cannot be read: each noted once (its warning said then), and the first few reasons kept
/// for a summary that a caller showing no warnings (`cuff sync`) prints instead.
public struct UnreadableOutboxRows: Sendable {
    /// The rows noted.
    public private(set) var ids: Set<Int64> = []
    /// Why, for the first ``keptReasons`` of them.
    public private(set) var reasons: [String] = []
    static let keptReasons = 3

    public init() {}

    public var count: Int { ids.count }

    /// Notes row `id`, unreadable for `reason`; true the first time (when it is to be said).
    @discardableResult
    public mutating func note(_ id: Int64, _ reason: String) -> Bool {
        guard ids.insert(id).inserted else { return false }
        if reasons.count < Self.keptReasons { reasons.append(reason) }
        return true
    }

    /// `a row` or `N rows`, and the verb `stays` or `stay` to go with it.
    public var rows: (noun: String, stay: String) { count == 1 ? ("a row", "stays") : ("\(count) rows", "stay") }

    /// `(REASON; REASON; and N more)`.
    public var reasonList: String {
        let more = count - reasons.count
        return "(" + reasons.joined(separator: "; ") + (more > 0 ? "; and \(more) more" : "") + ")"
    }
}
