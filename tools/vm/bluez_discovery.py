#!/usr/bin/python3
"""In the guest, with bluetoothd running: bluetoothd's own discovery before, during and after a
command (normally `cuff scan`). Holds a discovery session on ADAPTER (Transport le), waits until
bluetoothd reports DEVICE, runs the command, then removes DEVICE from bluetoothd and waits for its
discovery to find it again, which it only does while the controller still scans for it.
Prints one JSON line; exit 0 when both the command and the rediscovery succeeded.
Needs python3-dbus and python3-gi (Debian), as vmble's agent does.

  bluez_discovery.py hci1 00:AA:01:00:00:00 -- cuff scan --adapter hci1 --timeout 5
"""
import json, subprocess, sys, time
import dbus, dbus.mainloop.glib
from gi.repository import GLib

adapter, device = sys.argv[1], sys.argv[2].upper()
command = sys.argv[sys.argv.index("--") + 1:]
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.SystemBus()
apath = "/org/bluez/" + adapter
dpath = apath + "/dev_" + device.replace(":", "_")
ad = dbus.Interface(bus.get_object("org.bluez", apath), "org.bluez.Adapter1")
props = dbus.Interface(bus.get_object("org.bluez", apath), "org.freedesktop.DBus.Properties")
seen = []
def added(path, interfaces):
    if path == dpath and "org.bluez.Device1" in interfaces:
        seen.append(time.time())
bus.add_signal_receiver(added, dbus_interface="org.freedesktop.DBus.ObjectManager", signal_name="InterfacesAdded")
loop = GLib.MainLoop()
def run_until(cond, seconds):
    end = time.time() + seconds
    def tick():
        if cond() or time.time() > end:
            loop.quit(); return False
        return True
    GLib.timeout_add(100, tick)
    loop.run()
    return cond()
def known():
    om = dbus.Interface(bus.get_object("org.bluez", "/"), "org.freedesktop.DBus.ObjectManager")
    return dpath in om.GetManagedObjects()

ad.SetDiscoveryFilter({"Transport": "le"})
ad.StartDiscovery()
before = run_until(lambda: bool(seen) or known(), 20)
t = time.time()
cmd = subprocess.run(command, capture_output=True, text=True, timeout=60)
cmd_s = time.time() - t
found_by_cmd = device in cmd.stdout.upper()
discovering_after = bool(props.Get("org.bluez.Adapter1", "Discovering"))
try:
    ad.RemoveDevice(dpath)
except dbus.DBusException as e:
    print("RemoveDevice:", e, file=sys.stderr)
seen.clear()
t = time.time()
after = run_until(lambda: bool(seen), 20)
after_s = time.time() - t
ad.StopDiscovery()
result = {"found_before": before, "command_exit": cmd.returncode, "command_found_device": found_by_cmd,
          "command_seconds": round(cmd_s, 2), "discovering_after": discovering_after,
          "found_again_after": after, "seconds_to_find_again": round(after_s, 2) if after else None}
print(json.dumps(result))
sys.stderr.write(cmd.stderr)
sys.exit(0 if before and cmd.returncode == 0 and found_by_cmd and after else 1)
