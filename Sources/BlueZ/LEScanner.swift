// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Transport

/// Scans for LE advertisements with raw HCI commands (LE Set Scan Parameters / Enable) and reads
/// LE Advertising Reports (legacy and extended) from the adapter's raw HCI socket.
///
/// Chosen over MGMT Start Discovery because it needs no bluetoothd, shows every advertisement
/// with its raw AD bytes, and works the same on every kernel. Needs CAP_NET_RAW. Where the
/// controller is already scanning (the kernel's background scan, bluetoothd discovery) the enable
/// is refused with "command disallowed"; the scanner then listens to the reports of that scan and
/// says so in ``notes``. ``stop()`` (or deinit) turns scanning off again if we turned it on.
public final class LEScanner {
    public let adapter: BluetoothAdapter
    private let socket: HCISocket
    private var enabledByUs = false
    /// Things the user should know about this scan (e.g. reusing someone else's scan).
    public private(set) var notes: [String] = []

    /// Starts scanning.
    ///
    /// - Parameter active: send scan requests (to get scan responses, where names often are).
    public init(adapter: BluetoothAdapter, active: Bool = true) throws(TransportError) {
        self.adapter = adapter
        socket = try HCISocket(adapter: adapter)
        _ = try? socket.execute(.leSetScanEnable(false))  // may already be off: refusal is fine
        do {
            try socket.execute(.leSetScanParameters(active: active, interval: 0x0060, window: 0x0030))
            try socket.execute(.leSetScanEnable(true, filterDuplicates: false))
            enabledByUs = true
        } catch where error.message.contains("command disallowed") {
            notes.append("\(adapter) is already scanning (or uses extended scanning); listening to its reports")
        }
    }

    deinit { stop() }

    /// The reports of the next LE Meta advertising event, `[]` on timeout or signal.
    public func next(timeout: Duration?) throws(TransportError) -> [AdvertisingReport] {
        let deadline = timeout.map { MonotonicClock.now() + $0 }
        while true {
            let left = deadline.map { $0 - MonotonicClock.now() }
            if let left, left <= .zero { return [] }
            guard let event = try socket.nextEvent(timeout: left) else { return [] }
            if case .leMeta(let sub, let params) = event, sub == 0x02 || sub == 0x0D {
                // A malformed report from a hostile advertiser is skipped, not fatal.
                if let reports = try? AdvertisingReport.parse(subevent: sub, parameters: params), !reports.isEmpty {
                    return reports
                }
            }
        }
    }

    /// Scans for `duration`, merging each device's advertisement with its scan response.
    ///
    /// - Parameter stopEarly: return as soon as this is true of a merged report.
    /// - Returns: one report per address, in the order first seen.
    public func collect(for duration: Duration, stopEarly: (AdvertisingReport) -> Bool = { _ in false }) throws(TransportError) -> [AdvertisingReport] {
        let deadline = MonotonicClock.now() + duration
        var order: [BluetoothAddress] = []
        var byAddress: [BluetoothAddress: AdvertisingReport] = [:]
        while MonotonicClock.now() < deadline {
            let batch = try next(timeout: deadline - MonotonicClock.now())
            if batch.isEmpty { continue }
            for report in batch {
                if let old = byAddress[report.address] {
                    byAddress[report.address] = old.merged(with: report)
                } else {
                    order.append(report.address)
                    byAddress[report.address] = report
                    if order.count > 10_000 { break }  // bounded even among a flood of random addresses
                }
                if let merged = byAddress[report.address], stopEarly(merged) {
                    return order.compactMap { byAddress[$0] }
                }
            }
        }
        return order.compactMap { byAddress[$0] }
    }

    /// Turns scanning off (if we turned it on) and closes the socket. Idempotent.
    public func stop() {
        if enabledByUs {
            _ = try? socket.execute(.leSetScanEnable(false))
            enabledByUs = false
        }
        socket.close()
    }
}
