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

/// The driver-owned array of the action convention, reused from event to event: ``take()`` lends
/// it out empty, ``giveBack(_:)`` empties what comes back and keeps the larger storage. An event
/// taken while another event's actions still run (a driver that re-enters) gets a new array, so
/// neither sees the other's actions and the buffer is never shared.
public struct ActionBuffer<Element> {
    private var storage: [Element] = []

    public init() {}

    /// The buffer, empty (its storage kept); the buffer itself is left without storage until
    /// ``giveBack(_:)``.
    public mutating func take() -> [Element] {
        var lent: [Element] = []
        swap(&lent, &storage)
        return lent
    }

    /// Takes `lent` back emptied, keeping whichever storage is larger.
    public mutating func giveBack(_ lent: inout [Element]) {
        lent.removeAll(keepingCapacity: true)
        if lent.capacity > storage.capacity { swap(&lent, &storage) }
    }
}

extension ActionBuffer: Sendable where Element: Sendable {}
