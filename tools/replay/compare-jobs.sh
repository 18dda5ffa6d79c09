#!/usr/bin/env bash
# The default replay against `--jobs 1` on each capture given: RUNS alternating runs of each
# (default 11; which goes first alternates), wall time from the clock in ns, the medians printed
# with their ratio (above 1: the default is faster). Checks #26's "on any capture the default is
# never slower than --jobs 1" on shapes bench.sh does not make (captures of other programs, sizes
# near the parallel threshold). Each file is read once first (the page cache's time, not the disk's).
# Usage: tools/replay/compare-jobs.sh CUFF_BINARY FILE...   (RUNS=N to change the count)
set -euo pipefail
bin=$1; shift
runs=${RUNS:-11}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
one() {  # out args...: appends the run's wall time in 10 µs units to out
  local out=$1; shift
  local s e
  s=$(date +%s%N); "$bin" replay "$@" --quiet >/dev/null 2>&1 || true; e=$(date +%s%N)
  echo $(( (e - s) / 10000 )) >> "$out"
}
for f in "$@"; do
  cat "$f" > /dev/null
  : > "$tmp/d"; : > "$tmp/j"
  for i in $(seq "$runs"); do
    if [ $((i % 2)) = 0 ]; then one "$tmp/j" "$f" --jobs 1; fi
    one "$tmp/d" "$f"
    if [ $((i % 2)) = 1 ]; then one "$tmp/j" "$f" --jobs 1; fi
  done
  m=$(( (runs + 1) / 2 ))
  d=$(sort -n "$tmp/d" | sed -n "${m}p"); j=$(sort -n "$tmp/j" | sed -n "${m}p")
  printf '%-30s %11d B  default %7.1f ms  --jobs 1 %7.1f ms  ratio %.2f\n' "$(basename "$f")" \
    "$(stat -L -c %s "$f")" "$(echo "$d / 100" | bc -l)" "$(echo "$j / 100" | bc -l)" "$(echo "$j / $d" | bc -l)"
done
