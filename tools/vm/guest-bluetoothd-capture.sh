#!/bin/bash
# In the guest: record a capture of a Blood Pressure Service that bluetoothd serves through its own
# GATT server (tools/vm/bps_gatt_server.py: GattManager1 + LEAdvertisingManager1), read by
# `cuff measure` on the other controller. The btmon capture (capture.btsnoop in the out dir) is a
# peripheral cuff did not make: bluetoothd's attribute layout, its pace, its confirmations.
#
#   tools/vm/run.sh -- bash -c '"$CUFF_REPO/tools/vm/guest-bluetoothd-capture.sh"'
#   (tools/vm/make-foreign-capture.sh runs it and copies the capture into captures/foreign/)
set -u
. "${CUFF_REPO:?run through tools/vm/run.sh}/tools/vm/guest-lib.sh"
guest_init bluetoothd-capture --need-cuff
start_desktop
btmgmt -i "$P" power on > /dev/null 2>&1
btmgmt -i "$C" power on > /dev/null 2>&1
PADDR=$(hciconfig "$P" | awk '/BD Address/{print $3}')
/usr/bin/python3 "$REPO/tools/vm/bps_gatt_server.py" "$P" > gatt-server.log 2>&1 &
SRV=$!
for _ in $(seq 100); do grep -q advertising gatt-server.log && break; sleep 0.1; done
say "bluetoothd GATT server on $P ($PADDR): $(tr '\n' ' ' < gatt-server.log)"
timeout 60 "$CUFF" measure "$PADDR" --adapter "$C" --timeout 30 > bluetoothd-measure.ndjson 2> bluetoothd-measure.log
rc=$?
sleep 1
kill "$SRV" 2>/dev/null
say "measure exit $rc, $(grep -c '"type":"measurement"' bluetoothd-measure.ndjson) measurement(s); server: $(tr '\n' ' ' < gatt-server.log)"
tail -n 8 bluetoothd-measure.log
[ "$rc" = 0 ]
