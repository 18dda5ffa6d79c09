// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import GATT

/// A central session that drives a ``GATTClient`` (``CuffCentral``, ``VendorCentral``,
/// ``OmronCentral``): the client takes each event with ``clientScratch``, the array the session
/// reuses from event to event (``ActionBuffer``), and its actions run through the session's own
/// ``gatt(_:_:_:)``.
protocol GATTClientDriver {
    associatedtype Output
    var client: GATTClient { get set }
    var clientScratch: ActionBuffer<GATTClientAction> { get set }
    /// Runs the client's actions for one event into `out`.
    mutating func gatt(_ actions: [GATTClientAction], _ at: EventTime, _ out: inout [Output])
}

extension GATTClientDriver {
    /// The client takes an event (`call`, with ``clientScratch`` emptied; a call made while
    /// another one's actions run gets a new array); `noting` sees what `call` returned (a
    /// submitted procedure's ID) before the actions run into `out`, so an immediate completion
    /// among them finds what the procedure is for.
    mutating func clientStep<Result>(
        _ call: (inout GATTClient, inout [GATTClientAction]) -> Result, _ at: EventTime, _ out: inout [Output],
        noting: (inout Self, Result) -> Void = { _, _ in }
    ) {
        var actions = clientScratch.take()
        let result = call(&client, &actions)
        noting(&self, result)
        gatt(actions, at, &out)
        clientScratch.giveBack(&actions)
    }
}

extension CuffCentral: GATTClientDriver {}
extension VendorCentral: GATTClientDriver {}
extension OmronCentral: GATTClientDriver {}
