// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Transport

/// Calls on bluetoothd's `org.bluez.Device1` objects over the system bus.
public enum BlueZDevice {
    /// `Device1.Disconnect` of `device` on `adapter`: bluetoothd drops its GATT client and the
    /// link. After a bond is made bluetoothd attaches its own GATT client to the device ("reverse
    /// service discovery") and owns the ATT channel, so a raw ATT `connect()` to it fails with
    /// EBUSY until this is done (what `bluetoothctl disconnect ADDR` does).
    ///
    /// - Throws: no bus, policy refusal, bluetoothd absent, or its error (e.g.
    ///   `org.bluez.Error.NotConnected`, `org.freedesktop.DBus.Error.UnknownObject` when it does
    ///   not know the device).
    public static func disconnect(
        _ device: BluetoothAddress, on adapter: BluetoothAdapter, busPath: String = DBusConnection.systemBusPath(),
        timeout: Duration = .seconds(10)
    ) throws(TransportError) {
        let bus = try DBusConnection(path: busPath)
        defer { bus.close() }
        try bus.authenticate()
        try bus.hello()
        try bus.call(
            .call(
                destination: "org.bluez", path: BlueZPaths.device(device, on: adapter), interface: "org.bluez.Device1",
                member: "Disconnect"), timeout: timeout)
    }
}
