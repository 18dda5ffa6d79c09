#!/usr/bin/python3
"""In the guest, with bluetoothd running: is bluetoothd's own discovery still working after a
command (normally `cuff scan --backend raw`) ran during it?

Holds a discovery session on ADAPTER (Transport le), runs the command (`cuff scan --backend raw`,
or `cuff scan` through bluetoothd, which must leave this session running), then starts the device
(START: a command run in the background, its pid written to PIDFILE) and waits for bluetoothd to
report DEVICE. A device that starts advertising only after the command is found only while the
controller still scans for bluetoothd (controllers filter duplicate reports, so a device seen
before proves nothing). Prints one JSON line; exit 0 when the command exited 0, the adapter was
still Discovering after it and the device was found afterwards. A device object an earlier run
left is removed first, so this run sees the device appear again. Needs python3-dbus and python3-gi (Debian).

  bluez_discovery.py hci1 00:AA:01:00:00:00 PIDFILE -- CMD... --start START...
"""
import json, subprocess, sys, time
import dbus, dbus.mainloop.glib
from gi.repository import GLib

adapter, device, pidfile = sys.argv[1], sys.argv[2].upper(), sys.argv[3]
rest = sys.argv[sys.argv.index("--") + 1:]
command, start = rest[:rest.index("--start")], rest[rest.index("--start") + 1:]
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

# A device object an earlier run left (bluetoothd keeps it a while): removed, so that the device
# appearing again is seen (InterfacesAdded).
try:
    ad.RemoveDevice(dbus.ObjectPath(dpath))
except dbus.DBusException:
    pass
ad.SetDiscoveryFilter({"Transport": "le"})
ad.StartDiscovery()
run_until(lambda: False, 2)
t = time.time()
cmd = subprocess.run(command, capture_output=True, text=True, timeout=60)
cmd_s = time.time() - t
discovering_after = bool(props.Get("org.bluez.Adapter1", "Discovering"))
child = subprocess.Popen(start, stdout=open("desktop-sim.ndjson", "w"), stderr=open("desktop-sim.log", "w"), start_new_session=True)
open(pidfile, "w").write(str(child.pid))
t = time.time()
after = run_until(lambda: bool(seen), 25)
after_s = time.time() - t
ad.StopDiscovery()
result = {"command_exit": cmd.returncode, "command_seconds": round(cmd_s, 2), "discovering_after": discovering_after,
          "found_after": after, "seconds_to_find": round(after_s, 2) if after else None,
          "command_listened": "listening to its reports" in cmd.stderr}
print(json.dumps(result))
sys.stderr.write(cmd.stderr)
sys.exit(0 if cmd.returncode == 0 and discovering_after and after else 1)
