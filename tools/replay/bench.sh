#!/usr/bin/env bash
# Replay throughput: builds a capture of ≥ SIZE_MB (default 200) MB by repeating the committed
# captures/ sessions (timestamps moved on, one connection handle per copy), then measures in one run
#   cuff replay FILE (release, NDJSON to /dev/null; RUNS times, default 5), tshark -r FILE -T fields
#   -e btatt.opcode, and cat FILE > /dev/null
# with wall time, throughput and peak RSS from /usr/bin/time -v.
# Usage: tools/replay/bench.sh [SIZE_MB] [WORKDIR]
# SESSION_HEAVY=N: keep only each session's first N cuff-pressure notifications (many short
# sessions: the per-session path dominates instead of the notification path).
# SHORT_SESSIONS=N: N short sessions instead (the common shape of a gateway's btsnoop log): the
# first copy of each input whole, then bonded reconnects without discovery, each keeping its
# first SHORT_NOTIFICATIONS (default 3) notifications: about 20 records and 700 bytes a session
# (N = 20000: a 14.8 MB capture; SIZE_MB is then only an upper bound; SHORT_INPUTS: the sessions
# to copy, default captures/normal.btsnoop). Also times
# `cuff replay --jobs 1` (JOBS1_RUNS times, default RUNS) beside the default, in the same run,
# the two taking turns. JOBS1_RUNS=N does that for the other shapes too.
# The capture is made by tools/replay/make-capture.py (once; kept in WORKDIR). TSHARK=0 skips tshark
# (minutes on a 1 GB capture). CUFF=BINARY times that cuff instead of building one; otherwise the
# cuff timed is the installed build (README, "Installing"): release, --static-swift-stdlib.
set -euo pipefail
cd "$(dirname "$0")/../.."
size=${1:-200}
work=${2:-${TMPDIR:-/tmp}/cuff-replay-bench}
mkdir -p "$work"
heavy=${SESSION_HEAVY:-}
short=${SHORT_SESSIONS:-}
if [ -n "$short" ]; then
  heavy=${SHORT_NOTIFICATIONS:-3}
  file="$work/bench-short-$short-n$heavy.btsnoop"
  size=${1:-100000}
else
  file="$work/bench-${size}MB${heavy:+-sessions-$heavy}.btsnoop"
fi
if [ -n "${CUFF:-}" ]; then
  bin=$(mktemp -d); ln -s "$(realpath "$CUFF")" "$bin/cuff"  # CUFF=BINARY: that cuff, nothing built
else
  swift build -c release --static-swift-stdlib --product cuff >/dev/null
  bin=$(swift build -c release --static-swift-stdlib --show-bin-path)
fi
if [ ! -s "$file" ]; then
  python3 tools/replay/make-capture.py ${heavy:+--notifications "$heavy"} ${short:+--short --sessions "$short"} \
    "$file" "$size" $(if [ -n "$short" ]; then echo "${SHORT_INPUTS:-captures/normal.btsnoop}"; else echo captures/*.btsnoop; fi)
fi
bytes=$(stat -L -c %s "$file")
echo "capture: $file ($bytes bytes)"

measure() {  # label command...
  local label=$1; shift
  # Wall time from the clock in ns (/usr/bin/time counts in 10 ms steps: too coarse for a 14 MB file).
  local t0 t1 rss secs
  t0=$(date +%s%N)
  /usr/bin/time -v -o "$work/time.txt" "$@" >/dev/null 2>"$work/stderr.txt" || true
  t1=$(date +%s%N)
  rss=$(grep "Maximum resident set size" "$work/time.txt" | awk '{print $NF}')
  secs=$(echo "($t1 - $t0) / 1000000000" | bc -l)
  printf '%-8s %10.3f s %10.1f MB/s   peak RSS %7.1f MB\n' "$label" "$secs" "$(echo "$bytes / $secs / 1000000" | bc -l)" "$(echo "$rss / 1024" | bc -l)"
  echo "$secs" >"$work/$label.secs"
}

# cat of the file from the page cache: one unmeasured read first (a file just made, or one read
# from disk, would give the disk's time, not the cache's).
cat "$file" > /dev/null
measure cat sh -c "cat '$file' > /dev/null"
# cuff's runs are short and this kind of machine (shared vCPUs) varies by ±30 % from run to run:
# run it RUNS times (default 5) and compare tshark against the median and the best.
runs=${RUNS:-5}
# With SHORT_SESSIONS (or JOBS1_RUNS), the default and `--jobs 1` take turns (a drift in the
# machine's load then touches both alike), each going first every other turn.
jobs1_runs=${JOBS1_RUNS:-${short:+$runs}}
jobs1_runs=${jobs1_runs:-0}
jobs1_run() {  # i: the i-th `--jobs 1` run, when there is one
  if [ "$1" -le "$jobs1_runs" ]; then measure "jobs1#$1" "$bin/cuff" replay "$file" --quiet --jobs 1; fi
}
for i in $(seq "$(( runs > jobs1_runs ? runs : jobs1_runs ))"); do
  if [ $((i % 2)) = 0 ]; then jobs1_run "$i"; fi  # (which goes first alternates too)
  if [ "$i" -le "$runs" ]; then measure "cuff#$i" "$bin/cuff" replay "$file" --quiet; fi
  if [ $((i % 2)) = 1 ]; then jobs1_run "$i"; fi
done
summary() {  # label prefix runs: prints the median and best of "$work/prefix#*.secs", sets median, best
  sort -n "$work"/"$2"#*.secs > "$work/$2.all"
  median=$(awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }' "$work/$2.all")
  best=$(head -1 "$work/$2.all")
  printf '%-8s median of %d: %.3f s = %.1f MB/s; best %.3f s = %.1f MB/s\n' "$1" "$3" "$median" "$(echo "$bytes / $median / 1000000" | bc -l)" "$best" "$(echo "$bytes / $best / 1000000" | bc -l)"
  rm -f "$work"/"$2"#*.secs
}
if [ "$jobs1_runs" -gt 0 ]; then
  summary "jobs 1" jobs1 "$jobs1_runs"
  jobs1_median=$median
fi
summary cuff cuff "$runs"
if [ "$jobs1_runs" -gt 0 ]; then
  echo "default vs --jobs 1: $(echo "$jobs1_median / $median" | bc -l | cut -c1-6)× the speed of --jobs 1 (medians)"
  # (ReplayJob.defaultThreads: one replay thread per CPU, at most 4; one on a single CPU.)
  if [ "$(nproc)" -le 1 ]; then
    echo "  (on 1 CPU the default runs one replay thread, as --jobs 1 does: a difference is the machine's noise)"
  fi
fi
if [ "${TSHARK:-1}" = 0 ]; then
  echo "tshark: skipped (TSHARK=0)"
elif command -v tshark >/dev/null; then
  measure tshark sh -c "tshark -r '$file' -T fields -e btatt.opcode > /dev/null"
  t=$(cat "$work/tshark.secs")
  echo "cuff replay vs tshark: $(echo "$t / $median" | bc -l | cut -c1-6)× tshark's throughput (median run), $(echo "$t / $best" | bc -l | cut -c1-6)× (best run)"
else
  echo "tshark: not installed, skipped"
fi
echo "cuff replay records: $("$bin/cuff" replay "$file" --quiet 2>/dev/null | wc -l)"
