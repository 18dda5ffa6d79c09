// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Transport

/// Scans for LE advertisements with raw HCI commands (LE Set Scan Parameters / Enable) and reads
/// LE Advertising Reports (legacy and extended) from the adapter's raw HCI socket.
///
/// Chosen over MGMT Start Discovery because it needs no bluetoothd, shows every advertisement
/// with its raw AD bytes, and works the same on every kernel. Needs CAP_NET_RAW.
///
/// **Never breaks another owner's scan.** A raw socket sees every report the controller sends,
/// whoever started the scan, so when the controller already scans (bluetoothd discovery, the
/// kernel's background scan) cuff only listens. It finds that out without touching the scan:
/// the controller refuses LE Set Scan Parameters with "command disallowed" while scanning is
/// enabled (Core spec, Vol 4 Part E 7.8.10), and does the same for legacy commands once the host
/// uses extended scanning. Only when the parameters were accepted (nobody scans) does cuff enable
/// its own scan, and ``stop()`` turns off exactly that scan, leaving the controller as it was.
/// (Before 2026-11 cuff disabled any running scan first, and bluetoothd's discovery then found
/// nothing while still saying `Discovering: yes`.)
public final class LEScanner {
    public let adapter: BluetoothAdapter
    private let socket: HCISocket
    private var enabledByUs = false
    /// Things the user should know about this scan (e.g. reusing someone else's scan).
    public private(set) var notes: [String] = []
    /// Whether this scanner turned scanning on (false: it listens to a scan someone else runs).
    public var ownsScan: Bool { enabledByUs }

    /// Starts scanning, or listens to the scan already running.
    ///
    /// - Parameter active: send scan requests (to get scan responses, where names often are).
    public init(adapter: BluetoothAdapter, active: Bool = true) throws(TransportError) {
        self.adapter = adapter
        socket = try HCISocket(adapter: adapter)
        do {
            try socket.execute(.leSetScanParameters(active: active, interval: 0x0060, window: 0x0030))
        } catch  where error.hciStatus == HCIStatus.commandDisallowed {
            notes.append(
                "\(adapter) is already scanning (bluetoothd discovery, the kernel's background scan, or extended scanning); listening to its reports and leaving that scan alone"
            )
            return
        }
        do {
            try socket.execute(.leSetScanEnable(true, filterDuplicates: false))
            enabledByUs = true
        } catch  where error.hciStatus == HCIStatus.commandDisallowed {
            // Someone enabled a scan between the two commands: theirs now, listen to it.
            notes.append("\(adapter) started scanning meanwhile; listening to its reports")
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
    public func collect(for duration: Duration, stopEarly: (AdvertisingReport) -> Bool = { _ in false })
        throws(TransportError) -> [AdvertisingReport]
    {
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
