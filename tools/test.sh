#!/usr/bin/env bash
# The test command (README, .ci/run): installs what the tests need, checks the formatting
# (tools/format.sh --check), runs every test (and the example
# package's, Examples/ReplayInTests), then checks
# what `cuff` prints against the official FHIR and Open mHealth schemas, then the BlueZ VM test.
# It also fuzzes every libFuzzer target for 30 s (tools/fuzz; CUFF_FUZZ=0 skips, CUFF_FUZZ_SECONDS sets the time).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
shared="${CUFF_SHARED_DIR:-$root/../shared}"

bash tools/install-deps.sh --test

echo "== formatting (swift-format, .swift-format: lines of 120; bash tools/format.sh fixes it)"
bash tools/format.sh --check

echo "== build"
swift build --build-tests

echo "== swift test"
swift test 2>&1 | tee .build/test.log
# `swift test` exits non-zero on failure (pipefail).

echo "== the example package: cuff in your own tests (Examples/ReplayInTests, cuff by path)"
# A package of its own that depends on cuff's CuffTesting product, as a user's would: its test
# replays a committed capture and reads a simulated cuff. It builds only the targets it needs.
swift test --package-path Examples/ReplayInTests 2>&1 | tee .build/example-test.log

echo "== ThreadSanitizer: the replay engine's threads (ReplayEngineTests) in a TSan build"
# A separate build folder (.build-tsan): every target compiled with -sanitize=thread. Any report
# fails the run (halt_on_error), and the output is checked for one as well.
swift build --build-tests --sanitize=thread --scratch-path .build-tsan
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  swift test --skip-build --sanitize=thread --scratch-path .build-tsan --filter 'ReplayEngineTests' 2>&1 | tee .build/tsan.log
if grep -q "ThreadSanitizer" .build/tsan.log; then echo "ThreadSanitizer reported a problem (above)"; exit 1; fi

if [ "${CUFF_FUZZ:-1}" != 0 ]; then
  echo "== coverage-guided fuzzing (libFuzzer, ${CUFF_FUZZ_SECONDS:-30} s a target)"
  bash tools/fuzz/run.sh --seconds "${CUFF_FUZZ_SECONDS:-30}"
fi

echo "== schema validation of cuff's own output (every scenario, both personas)"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for persona in bps-1.0 bps-1.1; do
  for s in $(.build/debug/cuff simulate --list | cut -f1); do
    for f in fhir omh; do
      rc=0
      .build/debug/cuff measure --simulated "$s" --persona "$persona" --speed 0 --format "$f" --quiet >> "$out/all.$f.ndjson" || rc=$?
      if [ "$rc" != 0 ] && ! { [ "$s" = disconnect ] && [ "$rc" = 4 ]; }; then
        echo "cuff measure --simulated $s --persona $persona --format $f exited $rc"; exit 1
      fi
    done
  done
done
python3 "$shared/schemas/validate.py" fhir "$out/all.fhir.ndjson"
python3 "$shared/schemas/validate.py" omh "$out/all.omh.ndjson"

if [ "${CUFF_VM_TEST:-1}" != 0 ] && [ -x tools/vm/run.sh ] && [ -f tools/vm/test-ble.sh ]; then
  echo "== BlueZ end to end in a VM (from a clone under /tmp whose build is under /tmp too, where the guest mounts tmpfs)"
  # Users clone anywhere, /tmp included, and the guest covers /tmp with a tmpfs: run the VM test
  # from a real clone under /tmp whose `.build` is reached through /tmp (tools/vm/clone-under-tmp.sh).
  paths=$(bash tools/vm/clone-under-tmp.sh "$root")
  vmcopy=${paths%%$'\n'*}
  vmbuild=${paths#*$'\n'}
  trap 'rm -rf "$out" "$vmcopy" "$vmbuild"' EXIT
  bash "$vmcopy/tools/vm/test-ble.sh"
fi
echo "== all checks passed"
# One closing line for the whole run: the Swift tests (the VM's own test count is printed above).
n=$(grep -Eo "Test run with [0-9]+ tests" .build/test.log | tail -n 1 | grep -Eo "[0-9]+" || true)
echo "cuff: ${n:-0} passed, 0 failed"
