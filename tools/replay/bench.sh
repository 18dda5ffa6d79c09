#!/usr/bin/env bash
# Replay throughput: builds a capture of ≥ SIZE_MB (default 200) MB by repeating the committed
# captures/ sessions (timestamps moved on, one connection handle per copy), then measures in one run
#   cuff replay FILE (release, NDJSON to /dev/null), tshark -r FILE -T fields -e btatt.opcode,
#   cat FILE > /dev/null
# with wall time, throughput and peak RSS from /usr/bin/time -v.
# Usage: tools/replay/bench.sh [SIZE_MB] [WORKDIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
size=${1:-200}
work=${2:-${TMPDIR:-/tmp}/cuff-replay-bench}
mkdir -p "$work"
file="$work/bench-${size}MB.btsnoop"
swift build -c release --product cuff >/dev/null
swift build -c release --product CuffBenchmarks >/dev/null
bin=$(swift build -c release --show-bin-path)
if [ ! -s "$file" ]; then
  "$bin/CuffBenchmarks" make-capture "$file" "$size" captures/*.btsnoop
fi
bytes=$(stat -c %s "$file")
echo "capture: $file ($bytes bytes)"

measure() {  # label command...
  local label=$1; shift
  /usr/bin/time -v -o "$work/time.txt" "$@" >/dev/null 2>"$work/stderr.txt" || true
  local wall rss secs
  wall=$(grep "Elapsed (wall clock)" "$work/time.txt" | awk '{print $NF}')
  rss=$(grep "Maximum resident set size" "$work/time.txt" | awk '{print $NF}')
  secs=$(echo "$wall" | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
  printf '%-8s %10.2f s %10.1f MB/s   peak RSS %7.1f MB\n' "$label" "$secs" "$(echo "$bytes / $secs / 1000000" | bc -l)" "$(echo "$rss / 1024" | bc -l)"
  echo "$secs" >"$work/$label.secs"
}

measure cat sh -c "cat '$file' > /dev/null"
measure cuff "$bin/cuff" replay "$file" --quiet
if command -v tshark >/dev/null; then
  measure tshark sh -c "tshark -r '$file' -T fields -e btatt.opcode > /dev/null"
  echo "cuff replay vs tshark: $(echo "$(cat "$work/tshark.secs") / $(cat "$work/cuff.secs")" | bc -l | cut -c1-6)× tshark's throughput"
else
  echo "tshark: not installed, skipped"
fi
echo "cuff replay records: $("$bin/cuff" replay "$file" --quiet | wc -l)"
