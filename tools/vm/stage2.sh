#!/bin/bash
# Stage 2, PID 1 in the host tree (read-only): tmpfs where things get written, Bluetooth up
# (hci_vhci, btmon, two btvirt LE controllers), run $OUT/.guest-cmd, record its status in
# $OUT/guest-rc, power off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp LANG=C.UTF-8 TERM=dumb
OUT=
for arg in $(cat /proc/cmdline); do case "$arg" in cuff.out=*) OUT=${arg#cuff.out=} ;; esac; done
HERE=$(cd "$(dirname "$0")" && pwd)

# tmpfs where the guest writes. An out dir below one of them (e.g. /tmp/x) is moved aside first
# and put back on top, so it stays visible.
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/.cuff-out
mount --move "$OUT" /run/.cuff-out || echo "stage2: cannot move the out share"
for d in /tmp /var/tmp /var/lib/bluetooth /var/log /var/cache; do
  mount -t tmpfs -o mode=1777 tmpfs "$d" 2>/dev/null || echo "stage2: no tmpfs on $d"
done
mkdir -p "$OUT" 2>/dev/null
mount --move /run/.cuff-out "$OUT" || echo "stage2: cannot put the out share back at $OUT"
mkdir -p /dev/pts /dev/shm /run/dbus
ln -sf /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin; ln -sf /proc/self/fd/1 /dev/stdout; ln -sf /proc/self/fd/2 /dev/stderr
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
ip link set lo up 2>/dev/null

rc=125
if [ -n "$OUT" ] && [ -f "$OUT/.guest-cmd" ]; then
  cd "$OUT"
  bash "$HERE/guest-bluetooth.sh" bash "$OUT/.guest-cmd"
  rc=$?
else
  echo "stage2: no command at $OUT/.guest-cmd"
fi
echo "$rc" > "$OUT/guest-rc"
sync
echo "stage2: exit status $rc, powering off"
echo o > /proc/sysrq-trigger
sleep 10
