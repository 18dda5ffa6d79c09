#!/bin/bash
# In the guest: cuff's D-Bus pairing agent against a real bluetoothd.
#
#   swift build --build-tests
#   tools/vm/run.sh -- bash -c '"$CUFF_REPO/tools/vm/guest-dbus-agent.sh"'
#
# Starts dbus-daemon --system and bluetoothd (which then owns pairing: without an agent it
# rejects, "No agent available"), `cuff simulate` on the peripheral controller (its MGMT agent
# answers the peripheral side), then `cuff measure ADDRESS --security medium` on the central:
# with bluetoothd running, measure registers a NoInputNoOutput org.bluez.Agent1 over D-Bus
# (pure Swift) as the default agent, which accepts the pairing. Then `cuff pair` once more.
# Passes when measure exits 0 with NDJSON and its log shows the D-Bus agent registered, pair
# reports "paired", and a control run whose agent can't reach the bus fails with the advice.
# env: CUFF_BIN (default $CUFF_REPO/.build/debug/cuff).
set -u
. "${CUFF_REPO:?run through tools/vm/run.sh}/tools/vm/guest-lib.sh"
guest_init dbus-agent --need-cuff

start_desktop
say "dbus-daemon $DBUS, bluetoothd $BTD: $(grep -c 'has been enabled' bluetoothd.log) adapters enabled"

btmgmt -i "$P" power on > /dev/null 2>&1
btmgmt -i "$C" power on > /dev/null 2>&1
PADDR=$(hciconfig "$P" | awk '/BD Address/{print $3}')
CADDR=$(hciconfig "$C" | awk '/BD Address/{print $3}')
unpair() {  # drop the LE bond on both sides (-t 1: LE public; btmgmt's default is BR/EDR)
  btmgmt -i "$C" unpair -t 1 "$PADDR" 2>&1 | sed 's/^/    /'
  btmgmt -i "$P" unpair -t 1 "$CADDR" 2>&1 | sed 's/^/    /'
}
fails=0
run() {  # NAME COMMAND...: simulator up, scan, then COMMAND; echoes its exit status into $name.rc
  local name=$1; shift
  "$CUFF" simulate --backend raw --adapter "$P" --scenario normal --seed 1 --speed 6 --autostart > "sim-$name.ndjson" 2> "sim-$name.log" &
  local sim=$!
  local found=false
  for _ in 1 2 3; do
    timeout 30 "$CUFF" scan --adapter "$C" --timeout 5 > "scan-$name.ndjson" 2> "scan-$name.log"
    grep -qi "$PADDR" "scan-$name.ndjson" && { found=true; break; }
  done
  local rc=-1
  if $found; then timeout 90 "$@" > "$name.ndjson" 2> "$name.log"; rc=$?; fi
  kill -INT "$sim" 2>/dev/null
  wait_gone "$sim"
  kill -KILL "$sim" 2>/dev/null; wait "$sim" 2>/dev/null
  say "$name: scan found=$found, exit $rc, $(grep -c . "$name.ndjson" 2>/dev/null) NDJSON lines"
  sed 's/^/    /' "$name.log" | grep -iE 'agent|pair|secur|error|fail' | head -20
  echo "$rc" > "$name.rc"
}

run measure-dbus "$CUFF" measure "$PADDR" --adapter "$C" --backend raw --security medium
if [ "$(cat measure-dbus.rc)" = 0 ] && [ "$(grep -c . measure-dbus.ndjson)" -gt 0 ] \
   && grep -q 'pairing agent (D-Bus): agent: registered' measure-dbus.log; then
  say "measure --security medium with bluetoothd: PASS"
else
  say "measure --security medium with bluetoothd: FAIL"; fails=$((fails + 1))
fi
grep -qE 'confirm|authorize' measure-dbus.log && say "the D-Bus agent answered bluetoothd" \
  || say "note: no Agent1 call logged (bluetoothd may not have asked, e.g. bond already present)"

# cuff pair: drop the bond first so pairing really runs again.
unpair
run pair-dbus "$CUFF" pair "$PADDR" --adapter "$C" --backend raw --security medium
if [ "$(cat pair-dbus.rc)" = 0 ] && grep -q '"paired"' pair-dbus.ndjson; then
  say "pair with bluetoothd: PASS"
else
  say "pair with bluetoothd: FAIL"; fails=$((fails + 1))
fi

# Control: the same measure with the D-Bus agent unable to reach the bus must fall back to the
# advice and fail to pair (bluetoothd: "No agent available"), so the agent is what made it work.
unpair
run measure-noagent env DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent "$CUFF" measure "$PADDR" --adapter "$C" --security medium
if [ "$(cat measure-noagent.rc)" != 0 ] && grep -q 'no D-Bus pairing agent' measure-noagent.log \
   && grep -q 'register an agent' measure-noagent.log; then
  say "control without the D-Bus agent: fails as expected (advice printed): PASS"
else
  say "control without the D-Bus agent: FAIL (exit $(cat measure-noagent.rc))"; fails=$((fails + 1))
fi

say "bluetoothd on agents and pairing:"
grep -E 'No agent|agent|confirm|bonding_attempt_complete|auth' bluetoothd.log | sed 's/^/    /' | head -30
grep -q 'No agent available' bluetoothd.log && { say "bluetoothd said: No agent available"; }
kill "$BTD" 2>/dev/null; wait "$BTD" 2>/dev/null
kill "$DBUS" 2>/dev/null; wait "$DBUS" 2>/dev/null
say "$fails failed"
exit $fails
