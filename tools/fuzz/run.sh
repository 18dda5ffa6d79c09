#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for a bounded time; exits non-zero if any target
# crashes, leaks, times out or runs out of memory.
#   bash tools/fuzz/run.sh                         every target, 60 s each (what CI runs)
#   bash tools/fuzz/run.sh --seconds 3600 FuzzATT  one target for an hour
# The committed seeds (tools/fuzz/corpus/<Target>) are read only; what a run adds goes to
# .build-fuzz/corpus/<Target>, and a crashing input to .build-fuzz/artifacts/<Target>/.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=60
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --seconds=*) seconds="${1#*=}"; shift ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in tools/fuzz/Targets/*.swift; do targets+=("$(basename "$f" .swift)"); done
fi
out="${FUZZ_BUILD_DIR:-$(pwd)/.build-fuzz}"
bash tools/fuzz/build.sh "${targets[@]}"

# The longest input each target reads in full.
max_len() {
  case "$1" in
    FuzzCodecs) echo 600 ;;
    FuzzATT) echo 600 ;;
    FuzzGATTClient) echo 8192 ;;
    FuzzCapture) echo 32768 ;;
    FuzzStoreReader) echo 16384 ;;
    FuzzDBus) echo 4096 ;;
    *) echo 4096 ;;
  esac
}

# libFuzzer reports the crash; the Swift runtime's own backtracer would only slow it down.
export SWIFT_BACKTRACE=enable=no
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
failed=()
summary=()
for t in "${targets[@]}"; do
  mkdir -p "$out/corpus/$t" "$out/artifacts/$t" "tools/fuzz/corpus/$t"
  log="$out/$t.log"
  echo "== fuzz $t for ${seconds} s"
  rc=0
  "$out/bin/$t" "$out/corpus/$t" "tools/fuzz/corpus/$t" \
    -max_total_time="$seconds" -max_len="$(max_len "$t")" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$out/artifacts/$t/" > "$log" 2>&1 || rc=$?
  execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || true)
  speed=$(grep -Eo 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || true)
  cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1 || true)
  line="$t: ${execs:-?} execs, ${speed:-?}/s, ${cov:-no coverage line}"
  if [ "$rc" != 0 ]; then
    failed+=("$t")
    line="$line — FAILED (exit $rc)"
    grep -E 'ERROR: libFuzzer|ERROR: AddressSanitizer|Fatal error|deadly signal|SUMMARY' "$log" | head -n 5 || true
    tail -n 40 "$log"
    ls "$out/artifacts/$t"
  fi
  echo "$line"
  summary+=("$line")
done
echo "== fuzz summary"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${failed[*]} failed; the crashing inputs are in $out/artifacts/"
  exit 1
fi
