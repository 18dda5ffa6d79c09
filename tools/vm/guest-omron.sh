#!/bin/bash
# In the guest: a simulated Omron cuff (`cuff simulate --model`) on P, cuff on C, on both backends
# (issue #24's VM test):
#   raw (no bluetoothd; bonds in cuff's own store):
#     1. a factory-fresh custom-key cuff (HEM-7361T, --unpaired): `cuff scan` says it is Omron;
#        its Bluetooth button (SIGUSR1: pairing mode) and `cuff pair ADDR --model` program the key;
#     2. `cuff measure ADDR --keep-unread`, then `cuff measure ADDR` (marks them read: the same
#        readings), then `cuff measure ADDR` again: nothing new, exit 2;
#     3. `cuff watch --adapter C --device ADDR` across two turns of a simulated Omron cuff (each
#        turn a new process, paired with the default key as if another tool had paired it): both
#        turns' unread readings, each once in the store; SIGTERM ends it with 0;
#     4. every model family's profile (transport, pairing variant, record layout; CUFF_VM_OMRON_MODELS=all
#        for all 42) read whole over the radio: the readings the same model gives in process;
#   desktop (bluetoothd started first, owning both controllers):
#     5. the same pairing, measures and watch through bluetoothd (--backend auto).
# Every pairing, measure and watch session's NDJSON is kept as omron-*.ndjson: test-ble.sh checks
# that `cuff replay` of the btmon capture gives the same records (the model loop's, model-*.ndjson,
# are compared with the in-process readings only: see the README's known gap).
#
#   tools/vm/run.sh -- bash -c '"$CUFF_REPO/tools/vm/guest-omron.sh"'
#
# One JSON line per step in omron-results.jsonl; exit status = number of failed steps.
set -u
. "${CUFF_REPO:?run through tools/vm/run.sh}/tools/vm/guest-lib.sh"
guest_init omron --need-cuff
MODEL=${CUFF_VM_OMRON_MODEL:-HEM-7361T}
rm -f omron-results.jsonl omron-*.ndjson
fails=0
result() {  # STEP OK(true/false) EXTRA-JSON
  printf '{"step":"%s","ok":%s%s}\n' "$1" "$2" "${3:+,$3}" >> omron-results.jsonl
  say "$1: $($2 && echo PASS || echo FAIL) ${3:-}"
  $2 || fails=$((fails + 1))
}
count() { local n; n=$(grep -c '"type":"measurement"' "$1" 2>/dev/null) || true; echo "${n:-0}"; }
raws() { grep '"type":"measurement"' "$1" 2>/dev/null | grep -o '"raw":"[0-9a-f]*"' | sort; }

btmgmt -i "$P" power on > /dev/null 2>&1
btmgmt -i "$C" power on > /dev/null 2>&1
PADDR=$(hciconfig "$P" | awk '/BD Address/{print $3}')
CADDR=$(hciconfig "$C" | awk '/BD Address/{print $3}')
say "simulated Omron $MODEL on $P $PADDR; cuff on $C $CADDR"

sim() {  # NAME ARGS...: a simulated Omron cuff in the background, waiting for a central
  local name=$1; shift
  "$CUFF" simulate --adapter "$P" --model "$MODEL" --speed 10 "$@" > /dev/null 2> "omron-sim-$name.log" &
  SIM=$!
  for _ in $(seq 200); do grep -q 'waiting for a central\|registered' "omron-sim-$name.log" 2>/dev/null && break; kill -0 "$SIM" 2>/dev/null || break; sleep 0.1; done
}

syncs() {  # PREFIX BACKEND-ARGS...: pair, measure --keep-unread, measure, measure (nothing new)
  local prefix=$1; shift
  kill -USR1 "$SIM"   # the cuff's Bluetooth button: pairing mode
  sleep 1
  timeout 120 "$CUFF" pair "$PADDR" --adapter "$C" --model "$MODEL" "$@" > "omron-$prefix-pair.out" 2> "omron-$prefix-pair.log"
  local prc=$?
  ok=false; [ $prc = 0 ] && grep -q '"paired"' "omron-$prefix-pair.out" && ok=true
  result "$prefix-pair" $ok "\"exit\":$prc"
  if ! $ok; then
    sed 's/^/    /' "omron-$prefix-pair.log" | tail -8
    say "the simulator's log:"; sed 's/^/    /' "omron-sim-$prefix.log" | tail -12
  fi
  local n rc
  for n in keep mark none; do
    extra=(); [ $n = keep ] && extra=(--keep-unread)
    sleep 1
    timeout 120 "$CUFF" measure "$PADDR" --adapter "$C" "$@" "${extra[@]}" --timeout 90 > "omron-$prefix-$n.ndjson" 2> "omron-$prefix-$n.log"
    rc=$?
    eval "rc_$n=$rc"
    say "$prefix measure ($n): exit $rc, $(count "omron-$prefix-$n.ndjson") reading(s)"
    [ $rc = 0 ] || [ $n = none ] || sed 's/^/    /' "omron-$prefix-$n.log" | tail -6
  done
  ok=false
  [ "$rc_keep" = 0 ] && [ "$rc_mark" = 0 ] && [ "$(count "omron-$prefix-keep.ndjson")" -gt 0 ] \
    && [ "$(raws "omron-$prefix-keep.ndjson")" = "$(raws "omron-$prefix-mark.ndjson")" ] \
    && grep -q '"characteristic":"omron"' "omron-$prefix-keep.ndjson" && ok=true
  result "$prefix-measure-keep-unread-then-mark" $ok "\"readings\":$(count "omron-$prefix-keep.ndjson")"
  ok=false; [ "$rc_none" = 2 ] && [ "$(count "omron-$prefix-none.ndjson")" = 0 ] && ok=true
  result "$prefix-measure-nothing-new" $ok "\"exit\":$rc_none"
}

watch_turns() {  # PREFIX WATCH-ARGS...: cuff watch across two simulated turns (seeds 21, 22)
  local prefix=$1; shift
  local db=/tmp/cuff-omron-$prefix.db
  rm -f "$db"* "omron-$prefix-watch.ndjson"
  "$CUFF" watch --adapter "$C" --device "$PADDR" --store "$db" "$@" > "omron-$prefix-watch.ndjson" 2> "omron-$prefix-watch.log" &
  local W=$! turn before got expected=0
  for _ in $(seq 120); do grep -q "waiting for it to advertise\|following" "omron-$prefix-watch.log" 2>/dev/null && break; kill -0 "$W" 2>/dev/null || break; sleep 0.5; done
  for turn in 1 2; do
    before=$(count "omron-$prefix-watch.ndjson")
    sim "$prefix-watch-$turn" --seed $((20 + turn)) "${SIM_ARGS[@]}"
    got=false
    for _ in $(seq 180); do
      [ "$(count "omron-$prefix-watch.ndjson")" -gt "$before" ] && { got=true; break; }
      kill -0 "$W" 2>/dev/null || break
      sleep 0.5
    done
    sleep 4   # the rest of the sync: its last records and the end transaction that marks them read
    stop "$SIM"
    say "$prefix watch turn $turn: $(( $(count "omron-$prefix-watch.ndjson") - before )) new reading(s)"
    $got || { fails=$((fails + 1)); say "$prefix watch turn $turn: FAIL"; }
    sleep 1
  done
  kill -TERM "$W"
  for _ in $(seq 150); do kill -0 "$W" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$W" 2>/dev/null; wait "$W"; local wrc=$?
  local rows
  rows=$("$CUFF" history --store "$db" 2> "omron-$prefix-history.log" | grep -c '"systolic"') || true
  local printed dups
  printed=$(count "omron-$prefix-watch.ndjson")
  dups=$(raws "omron-$prefix-watch.ndjson" | uniq -d | wc -l)
  ok=false; [ "$wrc" = 0 ] && [ "$printed" -gt 0 ] && [ "${rows:-0}" = "$printed" ] && [ "$dups" = 0 ] && ok=true
  result "$prefix-watch-two-turns" $ok "\"watch_exit\":$wrc,\"printed\":$printed,\"stored\":${rows:-0},\"printed_twice\":$dups"
  $ok || { sed 's/^/    /' "omron-$prefix-watch.log" | tail -10; sed 's/^/    /' "omron-$prefix-history.log" | tail -4; }
}

# --- raw: no bluetoothd; cuff's own bond store.
BONDS=/tmp/cuff-omron-bonds
rm -f "$BONDS"
sim raw --unpaired
timeout 30 "$CUFF" scan --adapter "$C" --timeout 5 > omron-scan.out 2> omron-scan.log
ok=false; grep -i "$PADDR" omron-scan.out | grep -q '"omron"' && ok=true
result raw-scan-says-omron $ok "\"line\":$(grep -i "$PADDR" omron-scan.out | head -n 1 | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().strip()[:300]))')"
syncs raw --bonds "$BONDS"
stop "$SIM"
"$CUFF" pair --forget "$PADDR" --adapter "$C" --bonds "$BONDS" > /dev/null 2>&1
btmgmt -i "$P" unpair -t 1 "$CADDR" > /dev/null 2>&1
SIM_ARGS=()
watch_turns raw --bonds "$BONDS"

# --- raw: the model profiles over the radio. Each profile's simulated cuff (paired with the default
# key) read whole (`--all-records`) on the raw path gives the readings the same model and seed give
# in process. CUFF_VM_OMRON_MODELS: "families" (default: the first profile of each transport,
# pairing variant and record layout, 7 of them), "all" (all 42), or a list of profile ids.
MODELS=$(python3 - "$REPO/Sources/Omron/OmronCatalog.swift" "${CUFF_VM_OMRON_MODELS:-families}" <<'PY'
import re, sys
rows = re.findall(r'row\(\s*"([^"]+)",\s*\.(\w+),\s*\.(\w+),\s*[^,]+,\s*\.(\w+)', open(sys.argv[1]).read())
want, seen, out = sys.argv[2], set(), []
for pid, transport, pairing, layout in rows:
    if want == "all" or (want == "families" and (transport, pairing, layout) not in seen) or pid in want.split():
        seen.add((transport, pairing, layout))
        out.append(pid)
print(" ".join(out))
PY
)
tuples() {  # FILE: each measurement's (user, systolic, diastolic, pulse), sorted, one line
  python3 -c '
import json, sys
rows = sorted((r.get("user_id"), r.get("systolic"), r.get("diastolic"), r.get("pulse_rate")) for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "measurement")
print(len(rows), json.dumps(rows))' "$1" 2>/dev/null
}
MBONDS=/tmp/cuff-omron-model-bonds
rm -f "$MBONDS"
for m in $MODELS; do
  "$CUFF" measure --simulated normal --model "$m" --seed 5 --speed 0 --all-records --no-set-time --quiet > "omron-model-$m.ref" 2>/dev/null
  MODEL=$m sim "model-$m" --seed 5 --speed 20
  timeout 120 "$CUFF" measure "$PADDR" --adapter "$C" --all-records --no-set-time --security medium --bonds "$MBONDS" --timeout 90 \
    > "model-$m.ndjson" 2> "omron-model-$m.log"
  rc=$?
  stop "$SIM"
  live=$(tuples "model-$m.ndjson"); ref=$(tuples "omron-model-$m.ref")
  ok=false; [ $rc = 0 ] && [ -n "$live" ] && [ "${live%% *}" -gt 0 ] && [ "$live" = "$ref" ] && ok=true
  result "raw-model-$m" $ok "\"exit\":$rc,\"readings\":${live%% *},\"in_process\":${ref%% *}"
  $ok || sed 's/^/    /' "omron-model-$m.log" | tail -6
done
"$CUFF" pair --forget "$PADDR" --adapter "$C" --bonds "$MBONDS" > /dev/null 2>&1
btmgmt -i "$P" unpair -t 1 "$CADDR" > /dev/null 2>&1

# --- desktop: bluetoothd started first, owning both controllers.
start_desktop omron-
btmgmt -i "$P" power on > /dev/null 2>&1
btmgmt -i "$C" power on > /dev/null 2>&1
sim desktop --unpaired --backend raw
syncs desktop
stop "$SIM"
SIM_ARGS=(--backend raw)
watch_turns desktop
"$CUFF" pair --forget "$PADDR" --adapter "$C" > /dev/null 2>&1
kill "$BTD" 2>/dev/null; wait "$BTD" 2>/dev/null
kill "$DBUS" 2>/dev/null; wait "$DBUS" 2>/dev/null
say "$fails failed (omron-results.jsonl)"
exit $fails
