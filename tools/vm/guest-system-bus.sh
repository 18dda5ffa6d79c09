# Sourced by the guest scripts that need a "desktop": a system dbus-daemon, then bluetoothd on
# both controllers. Sets DBUS and BTD (pids) and BTD_BIN; logs to dbus.log and bluetoothd.log.
mkdir -p /run/dbus /var/lib/bluetooth
rm -f /run/dbus/pid /run/dbus/system_bus_socket
rm -rf /var/lib/bluetooth/*
dbus-daemon --system --nofork --nopidfile > dbus.log 2>&1 &
DBUS=$!
for _ in $(seq 100); do [ -S /run/dbus/system_bus_socket ] && break; sleep 0.05; done
BTD_BIN=$(command -v bluetoothd || echo /usr/libexec/bluetooth/bluetoothd)
"$BTD_BIN" -n -d > bluetoothd.log 2>&1 &
BTD=$!
for _ in $(seq 200); do [ "$(grep -c 'has been enabled' bluetoothd.log)" -ge 2 ] && break; sleep 0.05; done
