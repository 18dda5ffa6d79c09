#!/bin/bash
# In the guest: cuff on a "desktop", where bluetoothd was started first and owns both controllers.
#
#   tools/vm/run.sh -- bash -c '"$CUFF_REPO/tools/vm/guest-desktop.sh"'
#
# dbus-daemon --system and bluetoothd first; then `cuff simulate --adapter P` (after bluetoothd, so
# its ATT listener is the newer one and gets the incoming link). On the central C:
#   0. another client's bluetoothd discovery running (bluez_discovery.py) while `cuff scan` (auto:
#      through bluetoothd) runs; afterwards that discovery must still be on and find the simulated
#      cuff, which starts only then;
#   1. the same with `cuff scan --backend raw`;
#   2. `cuff scan` (auto: bluetoothd's discovery, cuff's own session) finds the cuff;
#   3. `cuff pair ADDR` (auto: Device1.Pair with an agent for this device only, not the default);
#   4. `cuff measure ADDR` right after, and 5. a second bonded `cuff measure ADDR` (auto: GATT
#      through bluetoothd): exit 0 with a measurement, no manual step;
#   6. `cuff measure ADDR --backend raw` beside bluetoothd (its GATT client holds the ATT channel:
#      EBUSY, freed with Device1.Disconnect) — exit 0 with a measurement;
#   7. the agent refusing a foreign request: bonds removed on both sides (`cuff pair --forget`;
#      the simulator's end only in the kernel, so bluetoothd keeps its device object and asks the
#      default agent about it), `cuff measure --backend raw --security medium` makes the kernel
#      pair; cuff's agent, the default one while it runs, is asked by bluetoothd about both ends;
#      the simulator's end (/org/bluez/P/dev_C) is not cuff's device: rejected and logged (the
#      pairing then fails, as it should with nobody accepting that end);
#   8. bluetoothd restarted after `cuff simulate`: its ATT listener is then the newer one and would
#      take the next central's link (and it resets advertising); the simulator must stop at once
#      with an error (exit 9), not wait silently.
# CUFF_DESKTOP_STEPS=discovery runs steps 0 and 1 only.
# On the host, test-desktop.sh compares the live records with `cuff replay` of the capture.
# One JSON line per step in desktop-results.jsonl; exit status = number of failed steps.
set -u
. "${CUFF_REPO:?run through tools/vm/run.sh}/tools/vm/guest-lib.sh"
guest_init desktop --need-cuff
rm -f desktop-results.jsonl
fails=0
result() {  # STEP OK(true/false) EXTRA-JSON
  printf '{"step":"%s","ok":%s%s}\n' "$1" "$2" "${3:+,$3}" >> desktop-results.jsonl
  say "$1: $($2 && echo PASS || echo FAIL) ${3:-}"
  $2 || fails=$((fails + 1))
}

start_desktop
say "dbus-daemon $DBUS, bluetoothd $BTD: $(grep -c 'has been enabled' bluetoothd.log) adapters enabled"
btmgmt -i "$P" power on > /dev/null 2>&1
btmgmt -i "$C" power on > /dev/null 2>&1
PADDR=$(hciconfig "$P" | awk '/BD Address/{print $3}')
CADDR=$(hciconfig "$C" | awk '/BD Address/{print $3}')
say "cuff (simulated) on $P $PADDR; client on $C $CADDR"

# 0. cuff scan (auto → bluetoothd) during another client's bluetoothd discovery (the same filter,
#    Transport le): that discovery must still be running afterwards and find the cuff, which starts
#    only then. (bluetoothd 5.66 stopped it when cuff joined with an equal filter and left.)
/usr/bin/python3 "$REPO/tools/vm/bluez_discovery.py" "$C" "$PADDR" sim.pid -- "$CUFF" scan --adapter "$C" --timeout 4 \
  --start "$CUFF" simulate --backend raw --adapter "$P" --scenario normal --seed 1 --speed 6 --autostart > desktop-discovery-0.json 2> desktop-discovery-0.log
drc=$?
SIM=$(cat sim.pid 2>/dev/null || echo 0)
ok=false; [ $drc = 0 ] && ok=true
result bluetoothd-scan-leaves-other-discovery "$ok" "\"detail\":$(cat desktop-discovery-0.json 2>/dev/null || echo null)"
sed 's/^/    /' desktop-discovery-0.log | head -6
kill -INT "$SIM" 2>/dev/null
wait_gone "$SIM"
kill -KILL "$SIM" 2>/dev/null
sleep 1

# 1. cuff scan --backend raw during a bluetoothd discovery; the cuff starts afterwards.
/usr/bin/python3 "$REPO/tools/vm/bluez_discovery.py" "$C" "$PADDR" sim.pid -- "$CUFF" scan --backend raw --adapter "$C" --timeout 4 \
  --start "$CUFF" simulate --backend raw --adapter "$P" --scenario normal --seed 1 --speed 6 --autostart > desktop-discovery.json 2> desktop-discovery.log
drc=$?
SIM=$(cat sim.pid 2>/dev/null || echo 0)
result raw-scan-then-bluetoothd-discovery "$([ $drc = 0 ] && echo true || echo false)" "\"detail\":$(cat desktop-discovery.json 2>/dev/null || echo null)"
sed 's/^/    /' desktop-discovery.log | head -6
sleep 1

if [ "${CUFF_DESKTOP_STEPS:-all}" = discovery ]; then  # only the discovery checks (0, 1)
  kill -INT "$SIM" 2>/dev/null; sleep 1; kill -KILL "$SIM" 2>/dev/null
  kill "$BTD" 2>/dev/null; wait "$BTD" 2>/dev/null
  kill "$DBUS" 2>/dev/null; wait "$DBUS" 2>/dev/null
  say "$fails failed (desktop-results.jsonl; CUFF_DESKTOP_STEPS=discovery: steps 0 and 1 only)"
  exit $fails
fi

# 2. cuff scan (auto → bluetoothd).
timeout 30 "$CUFF" scan --adapter "$C" --timeout 5 > desktop-scan.ndjson 2> desktop-scan.log
src=$?
ok=false; [ $src = 0 ] && grep -qi "$PADDR" desktop-scan.ndjson && ok=true
result scan $ok "\"exit\":$src"
sed 's/^/    /' desktop-scan.log | head -4; head -c 400 desktop-scan.ndjson; echo

# 3. pair.
timeout 90 "$CUFF" pair "$PADDR" --adapter "$C" > desktop-pair.ndjson 2> desktop-pair.log
prc=$?
ok=false; [ $prc = 0 ] && grep -q '"paired"' desktop-pair.ndjson && ok=true
result pair $ok "\"exit\":$prc"
sed 's/^/    /' desktop-pair.log | head -12

# 4, 5. measure twice (auto → bluetoothd); 6. once on the raw path beside bluetoothd.
for n in 1 2 raw; do
  extra=(); [ $n = raw ] && extra=(--backend raw)
  sleep 3  # the simulated cuff switches off after each measurement, as real ones do; let it come back
  timeout 90 "$CUFF" measure "$PADDR" --adapter "$C" "${extra[@]}" > "measure-desktop-$n.ndjson" 2> "desktop-measure-$n.log"
  mrc=$?
  m=$(grep -c '"type":"measurement"' "measure-desktop-$n.ndjson" 2>/dev/null)
  ok=false; [ $mrc = 0 ] && [ "${m:-0}" -gt 0 ] && ok=true
  result "measure-$n" $ok "\"exit\":$mrc,\"measurements\":${m:-0}"
  grep -iE 'backend|bluetoothd|agent|error|fail|busy|pair' "desktop-measure-$n.log" | sed 's/^/    /' | head -8
done

# 7. a foreign request, rejected.
timeout 30 "$CUFF" pair --forget "$PADDR" --adapter "$C" > desktop-forget.ndjson 2> desktop-forget.log
btmgmt -i "$P" unpair -t 1 "$CADDR" > /dev/null 2>&1
sleep 2
timeout 60 "$CUFF" measure "$PADDR" --adapter "$C" --backend raw --security medium --timeout 20 \
  > desktop-foreign.ndjson 2> desktop-foreign.log
frc=$?
foreign="/org/bluez/$P/dev_${CADDR//:/_}"
ok=false; grep -q "agent: rejected [A-Za-z]* for $foreign" desktop-foreign.log && ok=true
result agent-rejects-foreign $ok "\"measure_exit\":$frc"
grep -E 'agent|secur|pair' desktop-foreign.log | sed 's/^/    /' | head -8

kill -INT "$SIM" 2>/dev/null
wait_gone "$SIM"
kill -KILL "$SIM" 2>/dev/null
say "simulator log:"; grep -vE '^\s*$' desktop-sim.log | sed 's/^/    /' | head -40

# 8. bluetoothd restarted after cuff simulate.
"$CUFF" simulate --backend raw --adapter "$P" --scenario normal --seed 1 --speed 6 --autostart > desktop-sim2.ndjson 2> desktop-sim2.log &
SIM=$!
for _ in $(seq 150); do grep -q 'waiting for a central' desktop-sim2.log && break; sleep 0.1; done
kill "$BTD" 2>/dev/null; wait "$BTD" 2>/dev/null
"$BTD_BIN" -n -d > bluetoothd-2.log 2>&1 &
BTD=$!
src=-1
for _ in $(seq 100); do kill -0 "$SIM" 2>/dev/null || break; sleep 0.1; done
if ! kill -0 "$SIM" 2>/dev/null; then wait "$SIM"; src=$?; fi
ok=false; [ "$src" = 9 ] && grep -q 'bluetoothd stopped or restarted' desktop-sim2.log && ok=true
result simulator-stops-when-bluetoothd-restarts $ok "\"simulator_exit\":$src"
grep -E 'bluetoothd' desktop-sim2.log | sed 's/^/    /' | tail -2
kill -INT "$SIM" 2>/dev/null; sleep 0.5; kill -KILL "$SIM" 2>/dev/null
kill "$BTD" 2>/dev/null; wait "$BTD" 2>/dev/null
kill "$DBUS" 2>/dev/null; wait "$DBUS" 2>/dev/null
say "$fails failed (desktop-results.jsonl)"
exit $fails
