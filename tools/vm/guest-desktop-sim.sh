#!/bin/bash
# In the guest: the simulated cuff on a "desktop" through bluetoothd, as a user who is not root.
#
#   tools/vm/run.sh -- bash -c '"$CUFF_REPO/tools/vm/guest-desktop-sim.sh"'
#
# dbus-daemon --system and bluetoothd first (Debian's policy: the `bluetooth` group may call
# org.bluez; bluetoothd, as root, may call an application's GATT and advertisement interfaces).
# Then `cuff simulate --backend bluetoothd --adapter P` as user cuffsim (uid 4242, made here, in the
# `bluetooth` group; setpriv: no root, no capabilities), and on the central C:
#   1. the simulator registered its GATT application and advertisement;
#   2. `cuff measure ADDR --backend raw` and 3. `cuff measure ADDR --backend bluetoothd` each get a
#      measurement with the exact values the same cuff (scenario, seed) gives over a Unix socket;
#   4. bluetoothd restarted: the simulator waits, registers again, and 5. serves a measure again;
#   6. SIGINT: it unregisters and exits 0.
# One JSON line per step in desktop-sim-results.jsonl; exit status = number of failed steps.
set -u
REPO=${CUFF_REPO:?run through tools/vm/run.sh}
CUFF=${CUFF_BIN:-$REPO/.build/debug/cuff}
P=${CUFF_BT_PERIPHERAL:?run through tools/vm/run.sh}
C=${CUFF_BT_CENTRAL:?run through tools/vm/run.sh}
[ -x "$CUFF" ] || { echo "guest-desktop-sim: $CUFF not found — build it on the host first"; exit 2; }
T0=$(date +%s.%N)
say() { printf '[desktop-sim %6.2f] %s\n' "$(echo "$(date +%s.%N) - $T0" | bc)" "$*"; }
rm -f desktop-sim-results.jsonl
fails=0
result() {  # STEP OK(true/false) EXTRA-JSON
  printf '{"step":"%s","ok":%s%s}\n' "$1" "$2" "${3:+,$3}" >> desktop-sim-results.jsonl
  say "$1: $($2 && echo PASS || echo FAIL) ${3:-}"
  $2 || fails=$((fails + 1))
}
SIMARGS=(--scenario normal --seed 1 --speed 6 --autostart)

# The reference: the same cuff over a Unix socket, measured in the guest.
"$CUFF" simulate --listen unix:/tmp/ref.sock "${SIMARGS[@]}" > /dev/null 2> dsim-ref-sim.log &
REF=$!
for _ in $(seq 100); do [ -S /tmp/ref.sock ] && break; sleep 0.05; done
# One cuff measures anew for each client (the seed's 1st, 2nd, 3rd reading): three clients here,
# as the three measures below.
for i in 1 2 3; do
  timeout 60 "$CUFF" measure --connect unix:/tmp/ref.sock > "dsim-ref-$i.ndjson" 2> "dsim-ref-$i.log"
done
kill -INT "$REF" 2>/dev/null; wait "$REF" 2>/dev/null
values() {  # FILE: the first measurement's values, one line
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "measurement":
        print(json.dumps({k: r.get(k) for k in ("systolic", "diastolic", "mean_arterial_pressure", "pulse_rate", "status", "user_id")}, sort_keys=True))
        break
' "$1" 2>/dev/null
}
REFV=("" "$(values dsim-ref-1.ndjson)" "$(values dsim-ref-2.ndjson)" "$(values dsim-ref-3.ndjson)")
say "reference values: ${REFV[1]:-none} / ${REFV[2]:-none} / ${REFV[3]:-none}"

# A user who is not root, in the `bluetooth` group: dbus-daemon looks the caller's groups up in
# /etc/passwd and /etc/group (not the process's), and the guest's root is read-only: bind copies.
cp /etc/passwd /tmp/passwd.guest && echo 'cuffsim:x:4242:4242:cuff simulator:/tmp:/bin/sh' >> /tmp/passwd.guest
sed -e '/^bluetooth:/ s/$/,cuffsim/' -e '/^bluetooth:/ s/:,cuffsim$/:cuffsim/' /etc/group > /tmp/group.guest
echo 'cuffsim:x:4242:' >> /tmp/group.guest
mount --bind /tmp/passwd.guest /etc/passwd && mount --bind /tmp/group.guest /etc/group
say "user: $(id cuffsim 2>&1)"
. "$REPO/tools/vm/guest-system-bus.sh"
btmgmt -i "$P" power on > /dev/null 2>&1
btmgmt -i "$C" power on > /dev/null 2>&1
PADDR=$(hciconfig "$P" | awk '/BD Address/{print $3}')
CADDR=$(hciconfig "$C" | awk '/BD Address/{print $3}')
BTGID=$(getent group bluetooth | cut -d: -f3)
say "bluetoothd $BTD; cuff (simulated, uid 4242, group bluetooth=$BTGID) on $P $PADDR; client on $C $CADDR"

# 1. The simulator as a user who is not root.
setpriv --reuid=4242 --regid=4242 --groups="$BTGID" env HOME=/tmp \
  "$CUFF" simulate --backend bluetoothd --adapter "$P" "${SIMARGS[@]}" > dsim-sim.ndjson 2> dsim-sim.log &
SIM=$!
for _ in $(seq 150); do grep -q 'registered the advertisement' dsim-sim.log && break; sleep 0.1; done
ok=false; grep -q 'registered the application' dsim-sim.log && grep -q 'registered the advertisement' dsim-sim.log && kill -0 "$SIM" 2>/dev/null && ok=true
result registered-as-non-root $ok "\"uid\":$(ps -o uid= -p "$SIM" 2>/dev/null | tr -d ' ' || echo null)"

measure() {  # NAME BACKEND N (the cuff's Nth client)
  sleep 3  # the simulated cuff switches off after each measurement, as real ones do
  timeout 90 "$CUFF" measure "$PADDR" --adapter "$C" --backend "$2" > "dsim-measure-$1.ndjson" 2> "dsim-measure-$1.log"
  local rc=$? v
  v=$(values "dsim-measure-$1.ndjson")
  local ref=${REFV[$3]}
  local ok=false; [ $rc = 0 ] && [ -n "$ref" ] && [ "$v" = "$ref" ] && ok=true
  result "measure-$1" $ok "\"exit\":$rc,\"values\":${v:-null}"
  $ok || grep -iE 'error|fail|busy|timed' "dsim-measure-$1.log" | sed 's/^/    /' | head -6
}
# 2, 3.
measure raw raw 1
measure bluetoothd bluetoothd 2

# 4. bluetoothd restarted under the simulator.
kill "$BTD" 2>/dev/null; wait "$BTD" 2>/dev/null
"$BTD_BIN" -n -d > bluetoothd-2.log 2>&1 &
BTD=$!
for _ in $(seq 200); do [ "$(grep -c 'registered the advertisement' dsim-sim.log)" -ge 2 ] && break; sleep 0.1; done
ok=false; kill -0 "$SIM" 2>/dev/null && grep -q 'registering again' dsim-sim.log && [ "$(grep -c 'registered the application' dsim-sim.log)" -ge 2 ] && ok=true
result re-registers-after-bluetoothd-restart $ok
btmgmt -i "$C" power on > /dev/null 2>&1
# 5.
measure after-restart raw 3

# 6. Ctrl-C.
kill -INT "$SIM" 2>/dev/null
src=-1
for _ in $(seq 50); do kill -0 "$SIM" 2>/dev/null || break; sleep 0.1; done
if ! kill -0 "$SIM" 2>/dev/null; then wait "$SIM"; src=$?; else kill -KILL "$SIM"; fi
ok=false; [ "$src" = 0 ] && grep -q 'unregistered' dsim-sim.log && ok=true
result unregisters-on-sigint $ok "\"exit\":$src"
say "simulator log:"; sed 's/^/    /' dsim-sim.log | head -40
kill "$BTD" 2>/dev/null; wait "$BTD" 2>/dev/null
kill "$DBUS" 2>/dev/null; wait "$DBUS" 2>/dev/null
umount /etc/group /etc/passwd 2>/dev/null
say "$fails failed (desktop-sim-results.jsonl)"
exit $fails
