#!/usr/bin/env bash
# Regenerates captures/: one btsnoop (Linux monitor, datalink 2001) per simulator scenario, recorded
# by `cuff measure --simulated SCENARIO --speed 0 --seed 1 --capture`, and beside it the NDJSON
# `cuff replay` prints for it (what CaptureTests/CLITests compare against).
# Also: stored-records-bps-1.1 (the BPS 1.1 persona: Enhanced BPM, Record, RACP).
#
# The simulated session starts at the host's wall clock, so regenerating changes the timestamps
# (and the cuff's clock in the values); the files stay consistent with each other.
# Usage: tools/replay/make-captures.sh [--ndjson-only] [CUFF_BINARY]
#   --ndjson-only: keep every .btsnoop (foreign/ too) and regenerate only the NDJSON `cuff replay`
#   prints for it (after a change to the records, the diff shows only that change).
set -euo pipefail
cd "$(dirname "$0")/../.."
ndjson_only=false
if [ "${1:-}" = --ndjson-only ]; then ndjson_only=true; shift; fi
cuff=${1:-}
if [ -z "$cuff" ]; then
  swift build --product cuff >/dev/null
  cuff=.build/debug/cuff
fi
out=captures
mkdir -p "$out"
if $ndjson_only; then
  for f in "$out"/*.btsnoop "$out"/foreign/*.btsnoop; do
    "$cuff" replay "$f" --quiet >"${f%.btsnoop}.ndjson" || [ $? -eq 2 ]
    echo "${f%.btsnoop}.ndjson ($(wc -l <"${f%.btsnoop}.ndjson") records)"
  done
  exit 0
fi
record() {  # name scenario persona
  local name=$1 scenario=$2 persona=$3
  # Exit status 4 (disconnected) is the point of the `disconnect` scenario.
  "$cuff" measure --simulated "$scenario" --persona "$persona" --seed 1 --speed 0 --quiet \
    --capture "$out/$name.btsnoop" >/dev/null || [ $? -eq 4 ]
  "$cuff" replay "$out/$name.btsnoop" --quiet >"$out/$name.ndjson" || [ $? -eq 2 ]
  echo "$out/$name.btsnoop ($(wc -c <"$out/$name.btsnoop") bytes, $(wc -l <"$out/$name.ndjson") records)"
}
for s in $("$cuff" simulate --list | cut -f1); do
  record "$s" "$s" bps-1.0
done
record stored-records-bps-1.1 stored-records bps-1.1
