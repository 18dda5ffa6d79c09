#!/bin/bash
# In the guest: a captured cuff served on a real (virtual) adapter. `cuff simulate --from-capture
# FILE --adapter P` for captures/normal.btsnoop and the bluetoothd GATT server's capture, and
# `cuff measure ADDRESS --adapter C` on the other controller: the measurements must be those
# `cuff replay` reads from the same file (raw value and sequence number).
#
#   tools/vm/run.sh -- bash -c '"$CUFF_REPO/tools/vm/guest-from-capture.sh"'
set -u
. "${CUFF_REPO:?run through tools/vm/run.sh}/tools/vm/guest-lib.sh"
guest_init from-capture --need-cuff
btmgmt -i "$P" power on > /dev/null 2>&1
btmgmt -i "$C" power on > /dev/null 2>&1
PADDR=$(hciconfig "$P" | awk '/BD Address/{print $3}')
results() { python3 -c '
import sys, json
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(" ".join(sorted(r["raw"] + "/" + str(r.get("sequence_number")) for r in rows if r.get("type") == "measurement")))' "$1"; }
fails=0
for name in normal foreign/bluetoothd-gatt-server; do
  file=$REPO/captures/$name.btsnoop
  tag=$(basename "$name")
  "$CUFF" simulate --from-capture "$file" --adapter "$P" --speed 10 > /dev/null 2> "fc-sim-$tag.log" &
  S=$!
  for _ in $(seq 100); do grep -q "waiting for a central" "fc-sim-$tag.log" && break; sleep 0.1; done
  timeout 90 "$CUFF" measure "$PADDR" --adapter "$C" --timeout 40 > "fc-measure-$tag.ndjson" 2> "fc-measure-$tag.log"
  rc=$?
  kill -INT "$S" 2>/dev/null
  wait_gone "$S"
  kill -KILL "$S" 2>/dev/null; wait "$S" 2>/dev/null
  "$CUFF" replay "$file" --quiet > "fc-replay-$tag.ndjson" 2>/dev/null
  live=$(results "fc-measure-$tag.ndjson"); want=$(results "fc-replay-$tag.ndjson")
  if [ "$rc" = 0 ] && [ -n "$live" ] && [ "$live" = "$want" ]; then say "$name: measure exit 0, same measurements as cuff replay (PASS)"
  else say "$name: measure exit $rc; live [$live] replay [$want] (FAIL)"; tail -n 5 "fc-measure-$tag.log"; fails=$((fails + 1)); fi
done
[ $fails = 0 ]
