#!/bin/bash
# In the guest: run the BlueZ hardware tests from the debug test bundle, which the host must have
# built first (`swift build --build-tests`). CUFF_VM_FILTER picks other tests (default
# "HardwareTests"); output goes to the console and tests.log.
set -u
REPO=${CUFF_REPO:?run through tools/vm/run.sh}
BUNDLE=$REPO/.build/debug/cuffPackageTests.xctest
if [ ! -x "$BUNDLE" ]; then
  echo "guest-tests: $BUNDLE not found — run \`swift build --build-tests\` on the host first"
  exit 2
fi
FILTER=${CUFF_VM_FILTER:-HardwareTests}
echo "guest-tests: $BUNDLE --filter $FILTER (CUFF_BT_HARDWARE=$CUFF_BT_HARDWARE, peripheral $CUFF_BT_PERIPHERAL, central $CUFF_BT_CENTRAL)"
set -o pipefail
timeout -k 5 "${CUFF_VM_TEST_TIMEOUT:-300}" "$BUNDLE" --testing-library swift-testing --filter "$FILTER" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | tee tests.log
rc=$?
# A filter that matches nothing, or tests that all skipped, is not a pass.
if ! grep -q "Test run with [1-9][0-9]* test" tests.log || grep -q "skipped" tests.log; then
  echo "guest-tests: no test ran, or some skipped — treating as failure"
  [ $rc = 0 ] && rc=3
fi
exit $rc
