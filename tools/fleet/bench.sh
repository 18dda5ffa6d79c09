#!/usr/bin/env bash
# Fleet benchmark: `cuff simulate --cuffs N --every 60 --speed 60` against `cuff watch --store`
# on this machine, for SECONDS of wall time. Prints readings per second, commit latency p50/p99
# (from a measurement's arrival at the watcher to its store commit, as watch reports it), CPU
# seconds per reading and peak RSS of both processes, and checks that nothing was lost or stored
# twice. The installed build first (or set CUFF): `swift build -c release --static-swift-stdlib
# --product cuff` (README, "Installing").
#   N=1000 SECONDS=60 bash tools/fleet/bench.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${N:-1000}
SECONDS_RUN=${SECONDS:-60}
EVERY=${EVERY:-60}
SPEED=${SPEED:-60}
CUFF=${CUFF:-.build/release/cuff}
[ -x "$CUFF" ] || { echo "build first: swift build -c release --static-swift-stdlib --product cuff" >&2; exit 2; }
work=$(mktemp -d /tmp/cuff-fleet.XXXXXX)
trap 'kill $sim $watch 2>/dev/null || true; rm -rf "$work"' EXIT
ulimit -n 65536 2>/dev/null || ulimit -n 4096
# The GATT cache of the run's own (not the user's ~/.local/state/cuff): each cuff's first session discovers.
export XDG_STATE_HOME="$work/state"
"$CUFF" simulate --listen "unix:$work/cuffs" --cuffs "$N" --every "$EVERY" --speed "$SPEED" --quiet 2>"$work/sim.err" &
sim=$!
for _ in $(seq 100); do [ -S "$work/cuffs/cuff-$(printf %04d "$N").sock" ] && break; sleep 0.1; done
"$CUFF" watch --connect "unix:$work/cuffs" --store "$work/w.db" >"$work/out.ndjson" 2>"$work/watch.err" &
watch=$!
start=$(date +%s.%N)
sleep "$SECONDS_RUN"
# CPU and peak RSS before stopping (VmHWM: the high-water mark).
cpu() { awk '{print ($14+$15)/100}' "/proc/$1/stat"; }
hwm() { awk '/VmHWM/{print $2/1024}' "/proc/$1/status"; }
sim_cpu=$(cpu $sim); sim_rss=$(hwm $sim); watch_cpu=$(cpu $watch); watch_rss=$(hwm $watch)
kill -TERM $sim; wait $sim || true
kill -TERM $watch; rc=0; wait $watch || rc=$?
end=$(date +%s.%N)
summary=$(grep "stopped:" "$work/watch.err" | tail -1)
simsum=$(grep -E "measurements? taken" "$work/sim.err" | tail -1)
stored=$(echo "$summary" | grep -Eo '[0-9]+ reading\(s\) kept' | grep -Eo '^[0-9]+')
p50=$(echo "$summary" | sed -E 's/.*p50 ([0-9.]+) ms.*/\1/'); p99=$(echo "$summary" | sed -E 's/.*p99 ([0-9.]+) ms.*/\1/')
echo "$summary"; echo "$simsum"
taken=$(echo "$simsum" | grep -Eo '[0-9]+ measurements? taken' | grep -Eo '^[0-9]+')
confirmed=$(echo "$simsum" | grep -Eo '[0-9]+ readings? confirmed' | grep -Eo '^[0-9]+')
"$CUFF" history --store "$work/w.db" 2>/dev/null | python3 -c '
import sys, json, collections
rows = [json.loads(l) for l in sys.stdin]
keys = collections.Counter((r["device"]["serial"], r.get("timestamp"), r["systolic"], r["diastolic"], r["pulse_rate"], r.get("sequence_number")) for r in rows)
devices = len({r["device"]["serial"] for r in rows})
print(f"history: {len(rows)} rows from {devices} cuffs, {sum(1 for v in keys.values() if v > 1)} stored twice")
' | tee "$work/hist.txt"
printf 'cuffs %s, every %s s at speed %s, %s s run, watch exit %s\n' "$N" "$EVERY" "$SPEED" "$SECONDS_RUN" "$rc"
awk -v s="$stored" -v t="$SECONDS_RUN" -v wc="$watch_cpu" -v sc="$sim_cpu" 'BEGIN{printf "readings stored: %d (%.1f/s); CPU per reading: watch %.0f us, simulator %.0f us\n", s, s/t, wc/s*1e6, sc/s*1e6}'
echo "commit latency: p50 ${p50} ms, p99 ${p99} ms"
echo "peak RSS: watch ${watch_rss} MB, simulate ${sim_rss} MB"
echo "simulator: ${taken} measurements taken, ${confirmed} confirmed; stored >= confirmed: $([ "$stored" -ge "$confirmed" ] && echo yes || echo NO)"
