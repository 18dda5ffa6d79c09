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
# it was cloned under one of them (/tmp/cuff, /var/tmp/…), its build folder when `.build` is a
# link to one there (tools/test.sh links a copy's build to the clone's, which may be in /tmp too),
# and the out dir below it. So first the paths the repository needs are listed (the repository,
# then each hop of its `.build` link), a view of the whole host tree is kept at /run/.cuff-root
# and the out share is moved aside; after the tmpfs mounts each listed path that a tmpfs covers is
# shown again from that view (a directory bound, a link made anew) and the out share put on top.
REPO=$(cd "$HERE/../.." && pwd)
TMPFS_DIRS="/tmp /var/tmp /var/lib/bluetooth /var/log /var/cache"
NEEDED=("$REPO")
hop="$REPO/.build"
for _ in 1 2 3 4 5 6 7 8; do
  [ -L "$hop" ] || break
  target=$(readlink "$hop")
  case "$target" in /*) ;; *) target="$(dirname "$hop")/$target" ;; esac
  NEEDED+=("$target")
  hop=$target
done
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/.cuff-out /run/.cuff-root
mount --bind / /run/.cuff-root || echo "stage2: cannot keep a view of the host tree"
mount --move "$OUT" /run/.cuff-out || echo "stage2: cannot move the out share"
for d in $TMPFS_DIRS; do
  mount -t tmpfs -o mode=1777 tmpfs "$d" 2>/dev/null || echo "stage2: no tmpfs on $d"
done
shown=()
for path in "${NEEDED[@]}"; do
  for s in "${shown[@]}"; do case "$path/" in "$s"/*) continue 2 ;; esac; done  # inside one shown already
  for d in /run $TMPFS_DIRS; do
    case "$path/" in
      "$d"/*)
        if [ -L "/run/.cuff-root$path" ]; then
          mkdir -p "$(dirname "$path")" && ln -sfn "$(readlink "/run/.cuff-root$path")" "$path" \
            || echo "stage2: cannot make the link $path (below the tmpfs on $d)"
        else
          mkdir -p "$path" && mount --bind "/run/.cuff-root$path" "$path" && shown+=("$path") \
            || echo "stage2: cannot show $path (it lies below the tmpfs on $d)"
        fi
        break ;;
    esac
  done
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
