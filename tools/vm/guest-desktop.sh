#!/bin/bash
# In the guest: cuff on a "desktop", where bluetoothd was started first and owns both controllers.
#
#   tools/vm/run.sh -- bash -c '"$CUFF_REPO/tools/vm/guest-desktop.sh"'
#
# dbus-daemon --system and bluetoothd first; then `cuff simulate --adapter P` (after bluetoothd, so
# its ATT listener is the newer one and gets the incoming link). On the central C:
#   1. bluetoothd discovery running (bluez_discovery.py) while `cuff scan` runs; bluetoothd must
#      still find the cuff afterwards;
#   2. `cuff pair ADDR` (bluetoothd pairs: Device1.Pair with cuff's agent for this device only);
#   3. `cuff measure ADDR` right after, and 4. a second bonded `cuff measure ADDR`: exit 0 with a
#      measurement, no manual step (bluetoothd's own GATT client, attached after the bond, holds
#      the ATT channel: cuff asks it to let go with Device1.Disconnect);
#   5. the agent refusing a foreign request: with the bond removed on both sides, `cuff measure
#      --security medium` makes bluetoothd ask the default agent (cuff's) about *both* ends of the
#      pairing; the simulator's end (/org/bluez/P/dev_C) is not cuff's device: it must be rejected
#      and logged (the pairing then fails: expected).
# One JSON line per step in desktop-results.jsonl; exit status = number of failed steps.
set -u
REPO=${CUFF_REPO:?run through tools/vm/run.sh}
CUFF=${CUFF_BIN:-$REPO/.build/debug/cuff}
P=${CUFF_BT_PERIPHERAL:?run through tools/vm/run.sh}
C=${CUFF_BT_CENTRAL:?run through tools/vm/run.sh}
[ -x "$CUFF" ] || { echo "guest-desktop: $CUFF not found — build it on the host first"; exit 2; }
T0=$(date +%s.%N)
say() { printf '[desktop %6.2f] %s\n' "$(echo "$(date +%s.%N) - $T0" | bc)" "$*"; }
rm -f desktop-results.jsonl
fails=0
result() {  # STEP OK(true/false) EXTRA-JSON
  printf '{"step":"%s","ok":%s%s}\n' "$1" "$2" "${3:+,$3}" >> desktop-results.jsonl
  say "$1: $($2 && echo PASS || echo FAIL) ${3:-}"
  $2 || fails=$((fails + 1))
}

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
say "dbus-daemon $DBUS, bluetoothd $BTD: $(grep -c 'has been enabled' bluetoothd.log) adapters enabled"
btmgmt -i "$P" power on > /dev/null 2>&1
btmgmt -i "$C" power on > /dev/null 2>&1
PADDR=$(hciconfig "$P" | awk '/BD Address/{print $3}')
CADDR=$(hciconfig "$C" | awk '/BD Address/{print $3}')
say "cuff (simulated) on $P $PADDR; client on $C $CADDR"

"$CUFF" simulate --adapter "$P" --scenario normal --seed 1 --speed 6 --autostart > desktop-sim.ndjson 2> desktop-sim.log &
SIM=$!
sleep 2
kill -0 "$SIM" 2>/dev/null || { say "simulator died:"; cat desktop-sim.log; }

# 1. cuff scan during a bluetoothd discovery.
/usr/bin/python3 "$REPO/tools/vm/bluez_discovery.py" "$C" "$PADDR" -- "$CUFF" scan --adapter "$C" --timeout 5 \
  > desktop-scan.json 2> desktop-scan.log
src=$?
result scan-during-discovery "$([ $src = 0 ] && echo true || echo false)" "\"detail\":$(cat desktop-scan.json 2>/dev/null || echo null)"
sed 's/^/    /' desktop-scan.log | head -8

# 2. pair.
timeout 90 "$CUFF" pair "$PADDR" --adapter "$C" > desktop-pair.ndjson 2> desktop-pair.log
prc=$?
ok=false; [ $prc = 0 ] && grep -q '"paired"' desktop-pair.ndjson && ok=true
result pair $ok "\"exit\":$prc"
sed 's/^/    /' desktop-pair.log | head -12

# 3, 4. measure twice.
for n in 1 2; do
  timeout 90 "$CUFF" measure "$PADDR" --adapter "$C" > "desktop-measure-$n.ndjson" 2> "desktop-measure-$n.log"
  mrc=$?
  m=$(grep -c '"type":"measurement"' "desktop-measure-$n.ndjson" 2>/dev/null)
  ok=false; [ $mrc = 0 ] && [ "${m:-0}" -gt 0 ] && ok=true
  result "measure-$n" $ok "\"exit\":$mrc,\"measurements\":${m:-0}"
  grep -iE 'bluetoothd|agent|error|fail|busy' "desktop-measure-$n.log" | sed 's/^/    /' | head -8
done

# 5. the agent refusing a foreign request (see above).
dbus-send --system --print-reply --dest=org.bluez "/org/bluez/$C" org.bluez.Adapter1.RemoveDevice \
  "objectpath:/org/bluez/$C/dev_${PADDR//:/_}" > /dev/null 2>&1
dbus-send --system --print-reply --dest=org.bluez "/org/bluez/$P" org.bluez.Adapter1.RemoveDevice \
  "objectpath:/org/bluez/$P/dev_${CADDR//:/_}" > /dev/null 2>&1
sleep 1
timeout 60 "$CUFF" measure "$PADDR" --adapter "$C" --security medium --timeout 20 > desktop-foreign.ndjson 2> desktop-foreign.log
frc=$?
foreign="/org/bluez/$P/dev_${CADDR//:/_}"
ok=false; grep -q "agent: rejected [A-Za-z]* for $foreign" desktop-foreign.log && ok=true
result agent-rejects-foreign $ok "\"measure_exit\":$frc"
grep -E 'agent' desktop-foreign.log | sed 's/^/    /' | head -8

kill -INT "$SIM" 2>/dev/null
for _ in $(seq 50); do kill -0 "$SIM" 2>/dev/null || break; sleep 0.1; done
kill -KILL "$SIM" 2>/dev/null; wait "$SIM" 2>/dev/null
say "simulator log:"; grep -vE '^\s*$' desktop-sim.log | sed 's/^/    /' | head -20
kill "$BTD" 2>/dev/null; wait "$BTD" 2>/dev/null
kill "$DBUS" 2>/dev/null; wait "$DBUS" 2>/dev/null
say "$fails failed (desktop-results.jsonl)"
exit $fails
