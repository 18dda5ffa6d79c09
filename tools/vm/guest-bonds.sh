#!/bin/bash
# In the guest, without bluetoothd: a bond made on the raw path survives the kernel forgetting
# its keys (a reboot), because cuff keeps them in its bond store and loads them back.
#
#   tools/vm/run.sh -- bash -c '"$CUFF_REPO/tools/vm/guest-bonds.sh"'
#
# 1. `cuff pair ADDR --bonds FILE` (MGMT agent): paired, FILE mode 0600 with an LTK;
# 2. the central controller powered off and on, and its kernel keys dropped (what a reboot does:
#    MGMT Load Long Term Keys / IRKs with none);
# 3. `cuff measure ADDR --security medium --bonds FILE`: exit 0 with a measurement, the stored keys
#    loaded, and no pairing on the way (the agent is asked nothing: the link is encrypted with the
#    stored LTK, which the simulated cuff still has);
# 4. `cuff pair --forget ADDR --bonds FILE`: the store no longer has the peer.
# exit status: the number of failed steps.
set -u
. "${CUFF_REPO:?run through tools/vm/run.sh}/tools/vm/guest-lib.sh"
guest_init bonds --need-cuff
fails=0
check() { if "$2"; then say "$1: PASS"; else say "$1: FAIL"; fails=$((fails + 1)); fi; }
pgrep -x bluetoothd > /dev/null && { say "bluetoothd runs: this test is for the raw path"; exit 2; }
btmgmt -i "$P" power on > /dev/null 2>&1
btmgmt -i "$C" power on > /dev/null 2>&1
PADDR=$(hciconfig "$P" | awk '/BD Address/{print $3}')
CADDR=$(hciconfig "$C" | awk '/BD Address/{print $3}')
# Start from no bond on either side (earlier runs in this VM may have paired).
btmgmt -i "$C" unpair -t 1 "$PADDR" > /dev/null 2>&1
btmgmt -i "$P" unpair -t 1 "$CADDR" > /dev/null 2>&1
BONDS=$PWD/bonds-test/bonds
rm -rf "$PWD/bonds-test"
sim() {
  "$CUFF" simulate --adapter "$P" --scenario normal --seed 1 --speed 6 --autostart > "bonds-sim-$1.ndjson" 2> "bonds-sim-$1.log" &
  SIM=$!
  sleep 2
}
unsim() {
  kill -INT "$SIM" 2>/dev/null
  wait_gone "$SIM"
  kill -KILL "$SIM" 2>/dev/null; wait "$SIM" 2>/dev/null
}

sim pair
timeout 60 "$CUFF" pair "$PADDR" --adapter "$C" --bonds "$BONDS" > bonds-pair.ndjson 2> bonds-pair.log
prc=$?
unsim
sed 's/^/    /' bonds-pair.log | head -8
mode=$(stat -c %a "$BONDS" 2>/dev/null)
check "pair stores the bond (exit $prc, mode ${mode:-none}, $(grep -c '^ltk ' "$BONDS" 2>/dev/null) LTK)" \
  "$([ $prc = 0 ] && [ "$mode" = 600 ] && grep -q '^ltk ' "$BONDS" && echo true || echo false)"

btmgmt -i "$C" power off > /dev/null 2>&1
/usr/bin/python3 "$REPO/tools/vm/mgmt_forget_keys.py" "$C" | sed 's/^/    /'
btmgmt -i "$C" power on > /dev/null 2>&1
say "$C powered off and on, its kernel keys dropped"

sim measure
timeout 90 "$CUFF" measure "$PADDR" --adapter "$C" --security medium --bonds "$BONDS" > measure-bonded-reconnect.ndjson 2> bonds-measure.log
mrc=$?
unsim
grep -E 'bonds|agent|secur|pair' bonds-measure.log | sed 's/^/    /' | head -8
m=$(grep -c '"type":"measurement"' measure-bonded-reconnect.ndjson)
check "bonded measure after the keys were dropped (exit $mrc, $m measurement(s), keys loaded, no pairing)" \
  "$([ $mrc = 0 ] && [ "$m" -gt 0 ] && grep -q 'bonds: loaded' bonds-measure.log && ! grep -q 'confirm' bonds-measure.log && echo true || echo false)"

timeout 30 "$CUFF" pair --forget "$PADDR" --adapter "$C" --bonds "$BONDS" > bonds-forget.ndjson 2> bonds-forget.log
frc=$?
cat bonds-forget.ndjson | sed 's/^/    /'
check "pair --forget (exit $frc)" "$([ $frc = 0 ] && ! grep -q '^ltk ' "$BONDS" && echo true || echo false)"
btmgmt -i "$P" unpair -t 1 "$CADDR" > /dev/null 2>&1
say "$fails failed"
exit $fails
