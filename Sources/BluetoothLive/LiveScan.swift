// SPDX-License-Identifier: GPL-2.0-or-later
import BloodPressure
import BlueZ
import CuffCore
import CuffLogging
import Logging
import Omron
import Transport

extension AdvertisingReport {
    /// What cuff would use for this device: a profile, a vendor protocol, or none (`cuff scan`).
    public var recognition: CuffRecognition {
        CuffRecognition.recognise(
            name: localName, serviceUUIDs16: serviceUUIDs16, serviceUUIDs128: serviceUUIDs128,
            manufacturerData: manufacturerData)
    }

    /// What the advert says about an Omron cuff, or nil.
    public var omron: OmronAdvertisement? {
        OmronAdvertisement.recognise(name: localName, structures: structures.map { ($0.type, $0.data) })
    }

    /// Whether `cuff scan` shows it without `--all`: a Blood Pressure Service, a known cuff, an Omron cuff.
    public var isCuff: Bool { isBloodPressureCuff || recognition.isCuff || omron != nil }

    /// `cuff scan`'s `device` record: the advert's fields, and what cuff would use for it.
    public var deviceRecord: JSON? {
        guard case var .object(pairs) = json else { return nil }
        pairs.insert(("type", .string("device")), at: 0)
        pairs.append(("blood_pressure", .bool(isBloodPressureCuff)))
        // What cuff would use for it: a device family's profile, a vendor protocol (Omron's own
        // protocol wins when the advert shows it), or none.
        let recognised = recognition
        let omron = self.omron
        pairs.append(("profile", JSON.from(recognised.profileName, JSON.string)))
        pairs.append(("protocol", omron != nil ? .string("omron") : JSON.from(recognised.protocolName, JSON.string)))
        // Omron's advert (manufacturer 0x020E, service FE4A or ecbe3980…, BLESmart_ names): the key
        // is there only for an Omron cuff.
        if let omron { pairs.append(("omron", omron.json)) }
        return .object(pairs)
    }
}

/// `cuff scan`'s merging: each device given to `emit` once it has a name (or at the end), merged
/// with its scan response.
public final class ScanCollector {
    public let all: Bool
    let emit: (AdvertisingReport) throws -> Void
    var seen: [String: AdvertisingReport] = [:]
    var order: [String] = []
    var printed: Set<String> = []

    /// `all`: every device, not only cuffs.
    public init(all: Bool, emit: @escaping (AdvertisingReport) throws -> Void) {
        self.all = all
        self.emit = emit
    }

    /// One report; `replacing`: it replaces what was seen of the device (bluetoothd's view) instead of merging.
    public func take(_ r: AdvertisingReport, replacing: Bool = false) throws {
        let key = r.address.description
        if let old = seen[key], !replacing {
            seen[key] = old.merged(with: r)
        } else {
            if seen[key] == nil { order.append(key) }
            seen[key] = r
        }
        if let m = seen[key], !printed.contains(key), m.localName != nil, all || m.isCuff {
            printed.insert(key)
            try emit(m)
        }
    }

    /// The devices not emitted yet (no name came), then the summary line for `log`.
    public func finish(log: Logger) throws {
        for key in order where !printed.contains(key) {
            if let m = seen[key], all || m.isCuff { try emit(m) }
        }
        log.info(
            "\(seen.count) device(s) seen, \(seen.values.filter(\.isBloodPressureCuff).count) advertising the Blood Pressure service"
        )
    }
}

extension LiveBluetooth {
    /// `cuff scan`: `duration` of scanning (or until `stop`), each report into `collector`. With
    /// bluetoothd, its own discovery session (merged with any other client's; ours alone is
    /// stopped at the end), filtered to the cuffs' services unless `all`; else a raw HCI scan.
    public static func scan(
        adapter: BluetoothAdapter, backend: Backend, duration: Duration, all: Bool, stop: () -> Bool,
        collector: ScanCollector,
        log: Logger
    ) throws {
        if backend.resolved(log: log) == .bluetoothd {
            do {
                let bus = try BlueZBus()
                defer { bus.close() }
                try BlueZDiscovery.scan(
                    adapter: adapter, bus: bus, duration: duration,
                    uuids: all
                        ? []
                        : ["00001810-0000-1000-8000-00805f9b34fb", OmronUUID.modernService, OmronUUID.classicService],
                    stop: stop,
                    log: log
                ) { r in
                    try collector.take(r, replacing: true)  // bluetoothd's view replaces, not merges
                }
            } catch let e as TransportError {
                log.info("\(e.message)")
                throw LiveBluetoothFailure(.connectionFailed)
            }
            return
        }
        let scanner: LEScanner
        do {
            scanner = try LEScanner(adapter: adapter)
        } catch {
            log.info("\(error.message)")
            throw LiveBluetoothFailure(.connectionFailed)
        }
        defer { scanner.stop() }
        for note in scanner.notes { log.info("\(note)") }
        let end = MonotonicClock.now() + duration
        while MonotonicClock.now() < end, !stop() {
            let reports: [AdvertisingReport]
            do { reports = try scanner.next(timeout: .milliseconds(100)) } catch {
                log.info("\(error.message)")
                throw LiveBluetoothFailure(.connectionFailed)
            }
            for r in reports { try collector.take(r) }
        }
    }
}
