#!/usr/bin/env bash
# The tree's formatting (.swift-format: 4 spaces, lines of 120). `bash tools/format.sh` formats every
# Swift file in place; `bash tools/format.sh --check` (run by tools/test.sh) changes nothing and fails
# when a file is not as the formatter would write it. swift-format comes with the Swift toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -d '' files < <(git ls-files -z -- '*.swift')
if [ "${1:-}" = --check ]; then
  swift format lint --strict --parallel --configuration .swift-format "${files[@]}"
else
  swift format format --in-place --parallel --configuration .swift-format "${files[@]}"
fi
