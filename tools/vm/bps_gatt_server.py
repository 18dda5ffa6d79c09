#!/usr/bin/python3
# A Blood Pressure Service served by bluetoothd's own GATT server (GattManager1.RegisterApplication
# and LEAdvertisingManager1), for the VM: a peripheral cuff did not make, with bluetoothd's attribute
# layout (its GAP/GATT services first, then ours), to record captures that `cuff replay` and
# `cuff simulate --from-capture` must read. Written against BlueZ's doc/gatt-api.txt and
# doc/advertising-api.txt.
#
#   bps_gatt_server.py [ADAPTER]      (default hci0; /usr/bin/python3 with python3-dbus, python3-gi)
#
# Once a client subscribes to Blood Pressure Measurement (2A35, indicate), it sends READINGS one
# second apart (bluetoothd sends each indication and waits for its confirmation), then nothing.
import sys

import dbus
import dbus.exceptions
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

BLUEZ = "org.bluez"
OM = "org.freedesktop.DBus.ObjectManager"
PROPS = "org.freedesktop.DBus.Properties"
SERVICE = "org.bluez.GattService1"
CHAR = "org.bluez.GattCharacteristic1"
ADV = "org.bluez.LEAdvertisement1"


def u16(n):
    return f"0000{n:04x}-0000-1000-8000-00805f9b34fb"


def bpm(sys_, dia, mean, pulse, year, month, day, hour, minute, second):
    """A 2A35 value: flags (mmHg, time stamp, pulse rate), three SFLOATs (exponent 0), Date Time, pulse."""
    flags = 0x02 | 0x04
    out = [flags]
    for v in (sys_, dia, mean):
        out += [v & 0xFF, (v >> 8) & 0x0F]
    out += [year & 0xFF, year >> 8, month, day, hour, minute, second]
    out += [pulse & 0xFF, (pulse >> 8) & 0x0F]
    return out


READINGS = [
    bpm(128, 84, 99, 66, 2026, 3, 14, 7, 30, 5),
    bpm(131, 86, 101, 64, 2026, 3, 14, 7, 32, 40),
]


class Characteristic(dbus.service.Object):
    def __init__(self, bus, path, uuid, flags, service, value=None):
        super().__init__(bus, path)
        self.path, self.uuid, self.flags, self.service = path, uuid, flags, service
        self.value = value or []
        self.notifying = False

    def properties(self):
        return {CHAR: {"UUID": self.uuid, "Service": dbus.ObjectPath(self.service), "Flags": dbus.Array(self.flags, signature="s")}}

    @dbus.service.method(CHAR, in_signature="a{sv}", out_signature="ay")
    def ReadValue(self, options):
        return dbus.Array([dbus.Byte(b) for b in self.value], signature="y")

    @dbus.service.method(CHAR, in_signature="aya{sv}")
    def WriteValue(self, value, options):
        self.value = [int(b) for b in value]

    @dbus.service.method(CHAR)
    def StartNotify(self):
        if self.notifying:
            return
        self.notifying = True
        print(f"client subscribed to {self.uuid[4:8]}", flush=True)
        if self.uuid == u16(0x2A35):
            pending = list(READINGS)

            def send():
                if not self.notifying or not pending:
                    return False
                v = pending.pop(0)
                print("indicating " + bytes(v).hex(), flush=True)
                self.PropertiesChanged(CHAR, {"Value": dbus.Array([dbus.Byte(b) for b in v], signature="y")}, [])
                return bool(pending)

            GLib.timeout_add(1000, send)

    @dbus.service.method(CHAR)
    def StopNotify(self):
        self.notifying = False

    @dbus.service.signal(PROPS, signature="sa{sv}as")
    def PropertiesChanged(self, interface, changed, invalidated):
        pass


class Service(dbus.service.Object):
    def __init__(self, bus, path, uuid):
        super().__init__(bus, path)
        self.path, self.uuid, self.chars = path, uuid, []

    def add(self, bus, n, uuid, flags, value=None):
        c = Characteristic(bus, f"{self.path}/char{n}", uuid, flags, self.path, value)
        self.chars.append(c)
        return c

    def properties(self):
        return {SERVICE: {"UUID": self.uuid, "Primary": True}}


class Application(dbus.service.Object):
    def __init__(self, bus):
        self.path = "/cuff/bps"
        super().__init__(bus, self.path)
        bps = Service(bus, self.path + "/service0", u16(0x1810))
        bps.add(bus, 0, u16(0x2A35), ["indicate"])
        bps.add(bus, 1, u16(0x2A49), ["read"], [0x00, 0x00])
        dis = Service(bus, self.path + "/service1", u16(0x180A))
        dis.add(bus, 0, u16(0x2A29), ["read"], list(b"BlueZ GATT example"))
        dis.add(bus, 1, u16(0x2A24), ["read"], list(b"PY-BPS-1"))
        dis.add(bus, 2, u16(0x2A25), ["read"], list(b"PY-0001"))
        self.services = [bps, dis]

    @dbus.service.method(OM, out_signature="a{oa{sa{sv}}}")
    def GetManagedObjects(self):
        out = {}
        for s in self.services:
            out[dbus.ObjectPath(s.path)] = s.properties()
            for c in s.chars:
                out[dbus.ObjectPath(c.path)] = c.properties()
        return out


class Advertisement(dbus.service.Object):
    def __init__(self, bus):
        self.path = "/cuff/adv0"
        super().__init__(bus, self.path)

    @dbus.service.method(PROPS, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        return {"Type": "peripheral", "ServiceUUIDs": dbus.Array(["1810"], signature="s"), "LocalName": "PY-BPS"}

    @dbus.service.method(ADV)
    def Release(self):
        pass


def main():
    adapter = "/org/bluez/" + (sys.argv[1] if len(sys.argv) > 1 else "hci0")
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    app, adv = Application(bus), Advertisement(bus)
    loop = GLib.MainLoop()

    def failed(what):
        return lambda e: (print(f"{what} failed: {e}", flush=True), loop.quit())

    dbus.Interface(bus.get_object(BLUEZ, adapter), PROPS).Set("org.bluez.Adapter1", "Powered", dbus.Boolean(True))
    dbus.Interface(bus.get_object(BLUEZ, adapter), "org.bluez.GattManager1").RegisterApplication(
        app.path, {}, reply_handler=lambda: print("application registered", flush=True), error_handler=failed("RegisterApplication"))
    dbus.Interface(bus.get_object(BLUEZ, adapter), "org.bluez.LEAdvertisingManager1").RegisterAdvertisement(
        adv.path, {}, reply_handler=lambda: print("advertising", flush=True), error_handler=failed("RegisterAdvertisement"))
    loop.run()


if __name__ == "__main__":
    main()
