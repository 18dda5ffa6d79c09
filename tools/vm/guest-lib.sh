# Sourced by the guest scripts (tools/vm/guest-*.sh) right after `set -u`:
#
#   . "${CUFF_REPO:?run through tools/vm/run.sh}/tools/vm/guest-lib.sh"
#   guest_init NAME [--need-cuff]
#
# Sets REPO, CUFF (CUFF_BIN, else the debug build), P and C (the controllers run.sh made), T0 and
# XDG_STATE_HOME (on the guest's tmpfs),
# and gives the helpers every script needs:
#   say TEXT           a log line with the script's name and the seconds since it started
#   wait_gone PID      waits up to 5 s for PID to end (status 1 if it did not)
#   stop PID [SIGNAL]  SIGNAL (default INT), up to 5 s, then SIGKILL; its exit status in $stopped
#   start_desktop [P]  a system dbus-daemon, then bluetoothd on both controllers (as a desktop
#                      has them): sets DBUS, BTD (pids) and BTD_BIN; logs Pdbus.log, Pbluetoothd.log
REPO=${CUFF_REPO:?run through tools/vm/run.sh}
CUFF=${CUFF_BIN:-$REPO/.build/debug/cuff}
P=${CUFF_BT_PERIPHERAL:?run through tools/vm/run.sh}
C=${CUFF_BT_CENTRAL:?run through tools/vm/run.sh}
T0=$(date +%s.%N)
# cuff's state (the raw path's GATT cache, outboxes) on the guest's tmpfs, as a user's home would
# hold it: the host's root filesystem is shared read-only.
export XDG_STATE_HOME=${XDG_STATE_HOME:-/tmp/cuff-state}
GUEST_NAME=guest

guest_init() {  # NAME [--need-cuff]
  GUEST_NAME=$1
  if [ "${2:-}" = --need-cuff ] && [ ! -x "$CUFF" ]; then
    echo "guest-$GUEST_NAME: $CUFF not found — build it on the host first (swift build)"
    exit 2
  fi
}

now() { echo "$(date +%s.%N) - $T0" | bc; }
say() { printf '[%s %6.2f] %s\n' "$GUEST_NAME" "$(now)" "$*"; }

wait_gone() {  # PID
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  return 1
}

stop() {  # PID [SIGNAL]
  kill "-${2:-INT}" "$1" 2>/dev/null
  wait_gone "$1" || kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  stopped=$?
}

start_desktop() {  # [LOG-PREFIX]
  mkdir -p /run/dbus /var/lib/bluetooth
  rm -f /run/dbus/pid /run/dbus/system_bus_socket
  rm -rf /var/lib/bluetooth/*
  dbus-daemon --system --nofork --nopidfile > "${1:-}dbus.log" 2>&1 &
  DBUS=$!
  for _ in $(seq 100); do [ -S /run/dbus/system_bus_socket ] && break; sleep 0.05; done
  BTD_BIN=$(command -v bluetoothd || echo /usr/libexec/bluetooth/bluetoothd)
  "$BTD_BIN" -n -d > "${1:-}bluetoothd.log" 2>&1 &
  BTD=$!
  for _ in $(seq 200); do [ "$(grep -c 'has been enabled' "${1:-}bluetoothd.log")" -ge 2 ] && break; sleep 0.05; done
}
