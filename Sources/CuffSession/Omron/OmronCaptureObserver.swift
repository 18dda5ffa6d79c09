// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import GATT
import Omron

/// `cuff replay` of an Omron session: the captured connection's ATT PDUs mapped to the Omron
/// characteristics by the discovered handles, followed by an ``OmronObserver``; its readings as
/// the measurement records the live session gave.
public struct OmronCaptureObserver: CuffProtocolObserver {
    var observer: OmronObserver
    let byHandle: [UInt16: OmronCharacteristic]
    var device: DeviceInfo
    public private(set) var measurements = 0
    public private(set) var isFinished = false
    var started = false
    /// Device Information's model number: its handle, and a read of it under way.
    let modelHandle: UInt16?
    var modelReadPending = false
    var framesSeen = false
    /// The observer's outputs for one PDU, kept between PDUs (emptied, its capacity kept:
    /// ``ActionMachine``).
    var scratch = ActionBuffer<OmronObserver.Output>()

    static func text(_ readResponse: [UInt8]) -> String {
        String(decoding: readResponse.dropFirst().prefix { $0 != 0 }, as: UTF8.self)
    }

    public init(_ observer: OmronObserver, gatt: GATTProfile, device: DeviceInfo) {
        self.observer = observer
        let profile = observer.profile
        var m: [UInt16: OmronCharacteristic] = [:]
        let service = BluetoothUUID(profile.transport.serviceUUID)!
        for (i, u) in profile.transport.txUUIDs.enumerated() {
            if let c = gatt.characteristic(BluetoothUUID(u)!, in: service) { m[c.valueHandle] = .tx(i) }
        }
        for (i, u) in profile.transport.rxUUIDs.enumerated() {
            if let c = gatt.characteristic(BluetoothUUID(u)!, in: service) { m[c.valueHandle] = .rx(i) }
        }
        if let c = gatt.characteristic(BluetoothUUID(OmronUUID.unlock)!) { m[c.valueHandle] = .unlock }
        byHandle = m
        var d = device
        if d.manufacturer == nil { d.manufacturer = "OMRON HEALTHCARE" }
        self.device = d
        modelHandle = gatt.characteristic(BluetoothUUID(0x2A24))?.valueHandle
    }

    public var deadline: Timestamp? { nil }

    public mutating func connected(at: EventTime, into out: inout [ObserverOutput]) {
        guard !started else { return }
        started = true
        out.append(.emit(.session(SessionRecord(event: .start, device: device, at: at))))
    }

    public mutating func pdu(_ bytes: [UInt8], fromCentral: Bool, at: EventTime, into out: inout [ObserverOutput]) {
        // The session read the model number (no --model): the same profile as live.
        if fromCentral, bytes.count == 3, bytes[0] == 0x0A {
            modelReadPending = modelHandle == UInt16(bytes[1]) | UInt16(bytes[2]) << 8
            return
        }
        // (The request may have gone by before this observer took over: the standard observer
        // sees discovery end at the first PDU after it. A read response before any frame whose
        // text names a profile is taken as the model number then.)
        if !fromCentral, bytes.first == 0x0B,
            modelReadPending || (!framesSeen && OmronCatalog.profile(named: Self.text(bytes)) != nil)
        {
            modelReadPending = false
            let text = Self.text(bytes)
            device.model = text
            if let p = OmronCatalog.profile(named: text), p.transport == observer.profile.transport {
                observer = OmronObserver(profile: p)
            }
            return
        }
        guard bytes.count >= 3 else { return }
        let handle = UInt16(bytes[1]) | UInt16(bytes[2]) << 8
        guard let c = byHandle[handle] else { return }
        let value = Array(bytes[3...])
        switch (bytes[0], fromCentral) {
        case (0x12, true), (0x52, true):
            if case .tx = c { framesSeen = true }
            take({ $0.written(c, value, into: &$1) }, at, &out)
        case (0x1B, false): take({ $0.notified(c, value, into: &$1) }, at, &out)
        default: return
        }
    }

    /// The observer takes an event with ``scratch`` (a nested call gets a new array), and what it
    /// gives becomes records in `out`.
    mutating func take(
        _ call: (inout OmronObserver, inout [OmronObserver.Output]) -> Void, _ at: EventTime,
        _ out: inout [ObserverOutput]
    ) {
        var results = scratch.take()
        defer { scratch.giveBack(&results) }
        call(&observer, &results)
        for r in results {
            switch r {
            case let .reading(s):
                measurements += 1
                if device.model == nil { device.model = observer.profile.id }
                out.append(
                    .emit(
                        .measurement(
                            MeasurementRecord.from(
                                omron: s.reading, profile: observer.profile, user: s.user, slot: s.slot, raw: s.raw,
                                device: device, at: at))))
            case .clock: break
            case let .note(n): out.append(.log(n))
            }
        }
    }

    public mutating func advance(to time: Timestamp, inclusive: Bool, into out: inout [ObserverOutput]) {}

    public mutating func disconnected(_ why: String?, at: EventTime, into out: inout [ObserverOutput]) {
        guard !isFinished else { return }
        take({ $0.finish(into: &$1) }, at, &out)
        isFinished = true
        out.append(
            .emit(
                .session(
                    SessionRecord(
                        event: .end, device: device, at: at, outcome: measurements > 0 ? .completed : .noResult,
                        measurements: measurements, message: why))))
    }
}
