#!/usr/bin/env bash
# The BlueZ end-to-end check CI runs: in a VM with two virtual LE controllers,
#   1. the BlueZ hardware tests (advertise, scan, L2CAP ATT, Just Works pairing with our agent);
#   2. `cuff simulate --adapter` on one controller, `cuff scan` + `cuff measure ADDRESS` on the other,
#      for the normal, error, stored-records and disconnect scenarios, plain and with --security medium;
#   3. without bluetoothd, a bond kept in cuff's bond store survives the kernel dropping its keys
#      (guest-bonds.sh: pair, power-cycle + keys dropped, bonded measure, pair --forget);
#   4. the desktop: bluetoothd started first on both controllers (guest-desktop.sh): raw scan during
#      a bluetoothd discovery that must still find devices, scan/pair/measure twice through
#      bluetoothd, and a raw-path measure beside it;
#   5. (a second VM) cuff watch across simulator turns and simulate --from-capture;
#   6. (a third VM) `cuff simulate --backend bluetoothd` as a non-root user, served to cuff measure
#      (both backends), bluetoothctl's gatt menu and cuff watch, an unconfirmed reading re-sent,
#      a bluetoothd restart (guest-desktop-sim.sh; CUFF_VM_DESKTOP_SIM=0 skips);
#   7. (a fourth VM) a simulated Omron cuff (`cuff simulate --model`): scan, pair with its button,
#      measure --keep-unread / marking / nothing new, watch across two turns, raw and through
#      bluetoothd (guest-omron.sh; CUFF_VM_OMRON=0 skips), its capture replayed to the same records;
#   8. on the host, `cuff replay` of the btmon capture must give the same measurement records as
#      the live runs, both backends (all keys but received_at, which is the capture's clock instead of ours).
# Prints its wall time. Needs `swift build --build-tests` first (tools/test.sh does it).
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
out=tools/vm/out

echo "-- in one VM: the BlueZ hardware tests, then cuff scan / simulate --adapter / measure"
rc=0
CUFF_VM_TIMEOUT=${CUFF_VM_TIMEOUT:-900} tools/vm/run.sh -- bash -c '"$CUFF_REPO/tools/vm/guest-tests.sh" && "$CUFF_REPO/tools/vm/guest-measure.sh" && "$CUFF_REPO/tools/vm/guest-bonds.sh" && "$CUFF_REPO/tools/vm/guest-desktop.sh"' || rc=$?
cat "$out/measure-results.jsonl" "$out/desktop-results.jsonl" 2>/dev/null || true
if [ "$rc" != 0 ]; then
  echo "guest-measure failed ($rc); logs:"; tail -n 20 "$out"/measure-*.log 2>/dev/null || true
  exit 1
fi

echo "-- cuff replay of the btmon capture vs the live runs"
python3 tools/vm/replay-matches-live.py "$out" "measure-*.ndjson"
echo "-- cuff watch --adapter across two simulate turns (raw, then through bluetoothd); simulate --from-capture --adapter (a VM of its own)"
second='"$CUFF_REPO/tools/vm/guest-watch.sh" && "$CUFF_REPO/tools/vm/guest-from-capture.sh" && "$CUFF_REPO/tools/vm/guest-watch-desktop.sh"'
if ! CUFF_VM_TIMEOUT=${CUFF_VM_TIMEOUT:-900} CUFF_VM_OUT=tools/vm/out/watch tools/vm/run.sh -- bash -c "$second"; then
  echo "guest-watch failed; logs:"; tail -n 30 tools/vm/out/watch/console.log 2>/dev/null || true
  exit 1
fi
if [ "${CUFF_VM_OMRON:-1}" = 1 ]; then
  echo "-- a simulated Omron cuff: scan, pair, measure and watch, raw and through bluetoothd; its capture replayed (a VM of its own)"
  rc=0
  CUFF_VM_TIMEOUT=${CUFF_VM_TIMEOUT:-900} CUFF_VM_OUT=tools/vm/out/omron tools/vm/run.sh -- bash -c '"$CUFF_REPO/tools/vm/guest-omron.sh"' || rc=$?
  cat tools/vm/out/omron/omron-results.jsonl 2>/dev/null || true
  if [ "$rc" != 0 ]; then
    echo "guest-omron failed ($rc); logs:"; tail -n 40 tools/vm/out/omron/console.log 2>/dev/null || true
    exit 1
  fi
  python3 tools/vm/replay-matches-live.py --live-models-only tools/vm/out/omron "omron-*.ndjson"
fi
if [ "${CUFF_VM_DESKTOP_SIM:-1}" = 1 ]; then
  echo "-- cuff simulate --backend bluetoothd as a user who is not root, served to cuff measure, bluetoothctl and cuff watch (a VM of its own)"
  rc=0
  CUFF_VM_TIMEOUT=${CUFF_VM_TIMEOUT:-900} CUFF_VM_OUT=tools/vm/out/desktop-sim tools/vm/run.sh -- bash -c '"$CUFF_REPO/tools/vm/guest-desktop-sim.sh"' || rc=$?
  cat tools/vm/out/desktop-sim/desktop-sim-results.jsonl 2>/dev/null || true
  if [ "$rc" != 0 ]; then
    echo "guest-desktop-sim failed ($rc); logs:"; tail -n 40 tools/vm/out/desktop-sim/console.log 2>/dev/null || true
    exit 1
  fi
fi
echo "BlueZ VM test: $(( $(date +%s) - start )) s wall"
