#!/bin/busybox sh
# Stage 1, PID 1 of the initramfs: load virtio + 9p, mount the host root (read-only) and the out
# share (read-write, at its host path), then switch_root into the host tree and run stage 2.
/bin/busybox --install -s /bin
export PATH=/bin
mkdir -p /proc /sys /dev /newroot
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in /modules/*.ko; do insmod "$m" 2>/dev/null || echo "stage1: insmod $m failed"; done

STAGE2=; OUT=
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    cuff.stage2=*) STAGE2=${arg#cuff.stage2=} ;;
    cuff.out=*) OUT=${arg#cuff.out=} ;;
  esac
done

tries=0
until mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /newroot 2>/dev/null; do
  tries=$((tries + 1))
  [ $tries -gt 100 ] && { echo "stage1: cannot mount the host root over 9p"; poweroff -f; }
  sleep 0.05
done
mount -t 9p -o trans=virtio,version=9p2000.L,rw,msize=262144,cache=none outshare "/newroot$OUT" \
  || echo "stage1: cannot mount the out share at $OUT"
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
exec switch_root /newroot /bin/bash "$STAGE2"
