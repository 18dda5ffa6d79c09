#!/bin/bash
# Stage 2, PID 1 in the host tree (read-only): tmpfs where things get written, Bluetooth up
# (hci_vhci, btmon, two btvirt LE controllers), run $OUT/.guest-cmd, record its status in
# $OUT/guest-rc, power off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp LANG=C.UTF-8 TERM=dumb
OUT=
for arg in $(cat /proc/cmdline); do case "$arg" in cuff.out=*) OUT=${arg#cuff.out=} ;; esac; done
HERE=$(cd "$(dirname "$0")" && pwd)

# tmpfs where the guest writes. These hide what the host has there: the repository itself when
# it was cloned under one of them (/tmp/cuff, /var/tmp/…), and the out dir below it. So first a
# view of the whole host tree is kept at /run/.cuff-root, the out share is moved aside, and after
# the tmpfs mounts the repository is bound back from that view and the out share put on top.
REPO=$(cd "$HERE/../.." && pwd)
TMPFS_DIRS="/tmp /var/tmp /var/lib/bluetooth /var/log /var/cache"
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/.cuff-out /run/.cuff-root
mount --bind / /run/.cuff-root || echo "stage2: cannot keep a view of the host tree"
mount --move "$OUT" /run/.cuff-out || echo "stage2: cannot move the out share"
for d in $TMPFS_DIRS; do
  mount -t tmpfs -o mode=1777 tmpfs "$d" 2>/dev/null || echo "stage2: no tmpfs on $d"
done
for d in /run $TMPFS_DIRS; do
  case "$REPO/" in
    "$d"/*)
      mkdir -p "$REPO" && mount --bind "/run/.cuff-root$REPO" "$REPO" \
        || echo "stage2: cannot show the repository at $REPO (it lies below the tmpfs on $d)"
      break ;;
  esac
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
