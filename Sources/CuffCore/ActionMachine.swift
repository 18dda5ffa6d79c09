// SPDX-License-Identifier: GPL-2.0-or-later

/// The action convention of cuff's state machines (the session, the simulated cuff): a value
/// that takes one event and appends the actions it calls for, in the order the driver must
/// execute them, to an array the driver owns. The driver empties that array between events
/// with `removeAll(keepingCapacity: true)`, so once it has grown to an event's largest burst no
/// event allocates one. ``handle(_:)``, which returns a new array, is for tests and drivers off
/// the hot path.
public protocol ActionMachine {
    associatedtype Event
    associatedtype Action

    /// Takes `event`; appends the actions it calls for to `out`, in order.
    mutating func handle(_ event: Event, into out: inout [Action])
}

extension ActionMachine {
    /// ``handle(_:into:)`` into a new array (tests, and drivers off the hot path).
    public mutating func handle(_ event: Event) -> [Action] {
        var out: [Action] = []
        handle(event, into: &out)
        return out
    }
}
