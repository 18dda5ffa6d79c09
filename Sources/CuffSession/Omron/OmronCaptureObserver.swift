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

    public init(profile: OmronProfile, gatt: GATTProfile, device: DeviceInfo) {
        observer = OmronObserver(profile: profile)
        var m: [UInt16: OmronCharacteristic] = [:]
        let service = BluetoothUUID(profile.transport.serviceUUID)!
        for (i, u) in profile.transport.txUUIDs.enumerated() { if let c = gatt.characteristic(BluetoothUUID(u)!, in: service) { m[c.valueHandle] = .tx(i) } }
        for (i, u) in profile.transport.rxUUIDs.enumerated() { if let c = gatt.characteristic(BluetoothUUID(u)!, in: service) { m[c.valueHandle] = .rx(i) } }
        if let c = gatt.characteristic(BluetoothUUID(OmronUUID.unlock)!) { m[c.valueHandle] = .unlock }
        byHandle = m
        var d = device
        if d.model == nil { d.model = profile.id }
        self.device = d
    }

    public var deadline: Timestamp? { nil }

    public mutating func connected(at: EventTime, into out: inout [ObserverOutput]) {
        guard !started else { return }
        started = true
        out.append(.emit(.session(SessionRecord(event: .start, device: device, at: at))))
    }

    public mutating func pdu(_ bytes: [UInt8], fromCentral: Bool, at: EventTime, into out: inout [ObserverOutput]) {
        guard bytes.count >= 3 else { return }
        let handle = UInt16(bytes[1]) | UInt16(bytes[2]) << 8
        guard let c = byHandle[handle] else { return }
        let value = Array(bytes[3...])
        let results: [OmronObserver.Output]
        switch (bytes[0], fromCentral) {
        case (0x12, true), (0x52, true): results = observer.written(c, value)
        case (0x1B, false): results = observer.notified(c, value)
        default: return
        }
        for r in results {
            switch r {
            case let .reading(s):
                measurements += 1
                out.append(.emit(.measurement(MeasurementRecord.from(
                    omron: s.reading, profile: observer.profile, user: s.user, slot: s.slot, raw: s.raw, device: device, at: at))))
            case .clock: break
            case let .note(n): out.append(.log(n))
            }
        }
    }

    public mutating func advance(to time: Timestamp, inclusive: Bool, into out: inout [ObserverOutput]) {}

    public mutating func disconnected(_ why: String?, at: EventTime, into out: inout [ObserverOutput]) {
        guard !isFinished else { return }
        isFinished = true
        out.append(.emit(.session(SessionRecord(event: .end, device: device, at: at, outcome: measurements > 0 ? .completed : .noResult,
                                                measurements: measurements, message: why))))
    }
}
