#!/usr/bin/env bash
# The test command: unit and integration tests, then the checks that need the built CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build
swift test 2>&1 | tee .build/test.log
