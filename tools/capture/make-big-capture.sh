#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Builds a large btsnoop (Linux monitor, datalink 2001) capture for throughput benchmarks by
# repeating recorded ATT sessions with advancing timestamps and connection handles, logged on two
# controllers like the shared btmon sample. Then checks it opens in btmon and tshark.
#
# Usage: tools/capture/make-big-capture.sh OUTPUT [MEGABYTES=200] [TEMPLATE_CAPTURE]
#   TEMPLATE_CAPTURE: a btsnoop/pcap/pcapng whose ATT sessions are repeated (the central's side);
#                     default: the built-in blood-pressure session (BigCapture.bloodPressureSession).
#
# From Swift (e.g. a benchmark): try BigCapture.write(path:minimumBytes:datalink:sessions:).
set -euo pipefail

out=${1:?usage: make-big-capture.sh OUTPUT [MEGABYTES] [TEMPLATE_CAPTURE]}
mb=${2:-200}
from=${3:-}
case $out in /*) ;; *) out=$PWD/$out ;; esac
if [[ -n $from ]]; then case $from in /*) ;; *) from=$PWD/$from ;; esac; fi

cd "$(dirname "$0")/../.."
export CUFF_BIG_CAPTURE=$out CUFF_BIG_CAPTURE_MB=$mb
if [[ -n $from ]]; then export CUFF_BIG_CAPTURE_FROM=$from; fi
swift test --filter 'CaptureTests.BigCaptureTests/makeBigCapture' 2>&1 | grep -E 'make-big-capture:|✘|error:' || true
[[ -s $out ]] || { echo "make-big-capture: $out was not written" >&2; exit 1; }

ls -l "$out"
if command -v btmon >/dev/null; then
    (btmon -r "$out" 2>&1 | head -12) || true  # head closes the pipe early
fi
if command -v tshark >/dev/null; then
    echo "tshark: $(tshark -r "$out" -c 2000 -Y btatt 2>/dev/null | wc -l) ATT frames in the first 2000 records"
fi
