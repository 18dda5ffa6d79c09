#!/usr/bin/env bash
# Records captures/foreign/bluetoothd-gatt-server.* in the VM: bluetoothd serving a Blood Pressure
# Service through its own GATT server (tools/vm/bps_gatt_server.py) on one controller, `cuff measure`
# on the other. Writes the btmon capture, the live session's NDJSON (.live.ndjson) and what
# `cuff replay` prints for the capture (.ndjson). Needs `swift build` first.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=tools/vm/out/btd
CUFF_VM_OUT=$out tools/vm/run.sh -- bash -c '"$CUFF_REPO/tools/vm/guest-bluetoothd-capture.sh"'
cp "$out/capture.btsnoop" captures/foreign/bluetoothd-gatt-server.btsnoop
cp "$out/bluetoothd-measure.ndjson" captures/foreign/bluetoothd-gatt-server.live.ndjson
.build/debug/cuff replay captures/foreign/bluetoothd-gatt-server.btsnoop --quiet > captures/foreign/bluetoothd-gatt-server.ndjson
echo "captures/foreign/bluetoothd-gatt-server.{btsnoop,live.ndjson,ndjson} written"
