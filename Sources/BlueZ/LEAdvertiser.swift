// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Transport

/// Legacy LE advertising for the simulated cuff, with raw HCI commands: connectable undirected
/// (ADV_IND), Flags 0x06, 16-bit UUID list (0x1810), manufacturer data, the complete local name, and the name again
/// in the scan response.
///
/// A controller stops legacy advertising when a central connects; call ``restart()`` after the
/// link ends so the next central can find us. Needs CAP_NET_RAW and bluetoothd not advertising on
/// the same adapter (with bluetoothd, register an advertisement over D-Bus
/// `LEAdvertisingManager1` instead, or `btmgmt add-adv`).
public final class LEAdvertiser {
    public let adapter: BluetoothAdapter
    public private(set) var advertisingData: [UInt8]
    public private(set) var scanResponseData: [UInt8]
    private let socket: HCISocket
    private let interval: (UInt16, UInt16)
    public private(set) var isAdvertising = false

    /// Configures (but does not start) advertising.
    ///
    /// - Parameters:
    ///   - intervalMilliseconds: advertising interval (min; max is 1.5×), 20…10240 ms.
    public init(
        adapter: BluetoothAdapter, name: String, serviceUUIDs16: [UInt16] = [0x1810],
        manufacturerData: [UInt16: [UInt8]] = [:],
        intervalMilliseconds: Int = 100
    ) throws(TransportError) {
        self.adapter = adapter
        advertisingData = AdvertisingData.make(
            name: name, serviceUUIDs16: serviceUUIDs16, manufacturerData: manufacturerData)
        scanResponseData = AdvertisingData.scanResponse(name: name)
        let units = UInt16(clamping: max(32, min(16384, intervalMilliseconds * 8 / 5)))
        interval = (units, UInt16(clamping: min(16384, Int(units) * 3 / 2)))
        socket = try HCISocket(adapter: adapter)
    }

    deinit { stop() }

    /// Sets parameters and data, then enables advertising.
    public func start() throws(TransportError) {
        _ = try? socket.execute(.leSetAdvertisingEnable(false))
        try socket.execute(.leSetAdvertisingParameters(intervalMin: interval.0, intervalMax: interval.1))
        try socket.execute(.leSetAdvertisingData(advertisingData))
        try socket.execute(.leSetScanResponseData(scanResponseData))
        try socket.execute(.leSetAdvertisingEnable(true))
        isAdvertising = true
    }

    /// Enables advertising again (after a connection ended it). "Command disallowed" while a
    /// central is still connected is reported as an error; call it once the link is gone.
    public func restart() throws(TransportError) {
        do {
            try socket.execute(.leSetAdvertisingEnable(true))
        } catch  where error.hciStatus == HCIStatus.commandDisallowed {
            // Some controllers (pre-5.0 rules) refuse "enable" while still enabled: cycle it.
            _ = try? socket.execute(.leSetAdvertisingEnable(false))
            try socket.execute(.leSetAdvertisingEnable(true))
        }
        isAdvertising = true
    }

    /// Changes what is advertised while advertising goes on (a cuff's advertising data says
    /// whether it is in pairing mode and has data): sends only what changed.
    public func update(
        name: String, serviceUUIDs16: [UInt16], manufacturerData: [UInt16: [UInt8]]
    ) throws(TransportError) {
        let data = AdvertisingData.make(name: name, serviceUUIDs16: serviceUUIDs16, manufacturerData: manufacturerData)
        let response = AdvertisingData.scanResponse(name: name)
        if data != advertisingData {
            try socket.execute(.leSetAdvertisingData(data))
            advertisingData = data
        }
        if response != scanResponseData {
            try socket.execute(.leSetScanResponseData(response))
            scanResponseData = response
        }
    }

    /// Switches advertising off and on again, so a central that started scanning since hears it at
    /// once, and advertising that something else on the adapter turned off (the kernel does when
    /// bluetoothd removes its last advertisement) comes back. Call it every few seconds while
    /// waiting for a central.
    ///
    /// A radio repeats an advertisement every interval, but an emulated controller (btvirt) reports
    /// one to a scanner only at the moment advertising or scanning is switched on: a report that
    /// reaches the scanner's kernel before its discovery counts as running is dropped, and the cuff
    /// stays unseen until something is switched on again. Enabling while enabled is refused
    /// ("command disallowed") and reports nothing, so it is switched off first. On a radio the
    /// gap is two HCI commands long; a central connecting then waits for the next advertisement.
    public func reassert() throws(TransportError) {
        do {
            try socket.execute(.leSetAdvertisingEnable(false))
        } catch  where error.hciStatus == HCIStatus.commandDisallowed {
            // Off already (the kernel, or a link, turned it off).
        }
        isAdvertising = false
        try socket.execute(.leSetAdvertisingEnable(true))
        isAdvertising = true
    }

    /// Disables advertising and closes the socket. Idempotent.
    public func stop() {
        if isAdvertising {
            _ = try? socket.execute(.leSetAdvertisingEnable(false))
            isAdvertising = false
        }
        socket.close()
    }
}
