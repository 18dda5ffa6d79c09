#!/bin/bash
# cuff VM harness: boot Debian's stock kernel in qemu with the host's root filesystem shared
# read-only over 9p, two virtual LE controllers (btvirt) and btmon recording, run one command
# in the guest, power off, and exit with that command's status.
#
# usage: tools/vm/run.sh [-- COMMAND ARGS...]
#   default COMMAND: tools/vm/guest-tests.sh (the BlueZ hardware tests of the debug test bundle)
# env:
#   CUFF_VM_OUT      host directory shared read-write with the guest (default tools/vm/out);
#                    the guest command runs there; capture.btsnoop, capture.txt, console.log …
#   CUFF_VM_TIMEOUT  seconds before the VM is killed (default 540)
#   CUFF_VM_ACCEL    auto | kvm | tcg (auto: TCG when /dev/kvm is kvm_pvm, which can't run a
#                    stock kernel)
#   CUFF_VM_MEM, CUFF_VM_SMP   guest memory (MiB, default 1024) and CPUs (default 2)
#   CUFF_*           every CUFF_ variable is passed into the guest (e.g. CUFF_VM_FILTER)
# exit status: the guest command's; 124 VM timeout; 125 VM could not be set up.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
[ "${1:-}" = "--" ] && shift

OUT=${CUFF_VM_OUT:-$HERE/out}
TIMEOUT=${CUFF_VM_TIMEOUT:-540}
BUILD=$HERE/build
mkdir -p "$OUT" "$BUILD"
OUT=$(cd "$OUT" && pwd)
case "$OUT" in *[[:space:],]*) echo "cuff-vm: CUFF_VM_OUT must not contain spaces or commas (qemu -virtfs)" >&2; exit 125 ;; esac

fail() { echo "cuff-vm: $*" >&2; exit 125; }
command -v qemu-system-x86_64 >/dev/null || fail "qemu-system-x86_64 missing: apt-get install qemu-system-x86"
[ -x /bin/busybox ] || fail "/bin/busybox missing: apt-get install busybox-static"
command -v btvirt >/dev/null || fail "btvirt missing: apt-get install bluez-test-tools"

# Kernel: the newest /boot/vmlinuz-* whose modules include Bluetooth.
KVER=
for k in $(ls -1 /boot/vmlinuz-* 2>/dev/null | sed 's|/boot/vmlinuz-||' | sort -V -r); do
  [ -e "/lib/modules/$k/kernel/drivers/bluetooth/hci_vhci.ko" ] || [ -e "/lib/modules/$k/kernel/drivers/bluetooth/hci_vhci.ko.xz" ] && { KVER=$k; break; }
done
[ -n "$KVER" ] || fail "no /boot/vmlinuz-* with Bluetooth modules: apt-get install linux-image-amd64"

# Initramfs: busybox, the virtio + 9p modules, our stage-1 init. Rebuilt when init changes.
INITRD=$BUILD/initramfs-$KVER.cpio.gz
if [ ! -s "$INITRD" ] || [ "$HERE/stage1-init.sh" -nt "$INITRD" ]; then
  T=$(mktemp -d)
  trap 'rm -rf "$T"' EXIT
  mkdir -p "$T/bin" "$T/modules"
  cp /bin/busybox "$T/bin/busybox"
  cp "$HERE/stage1-init.sh" "$T/init"
  chmod 755 "$T/init"
  n=0
  for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p; do
    f=$(modinfo -k "$KVER" -n "$m" 2>/dev/null) || continue   # built in, or absent in this kernel
    n=$((n + 1))
    case "$f" in
      *.ko) cp "$f" "$T/modules/$(printf %02d $n)-$m.ko" ;;
      *.ko.xz) xz -dc "$f" > "$T/modules/$(printf %02d $n)-$m.ko" ;;
      *.ko.zst) zstd -qdc "$f" > "$T/modules/$(printf %02d $n)-$m.ko" ;;
    esac
  done
  (cd "$T" && find . | cpio -o -H newc --quiet | gzip -1) > "$INITRD.tmp"
  mv "$INITRD.tmp" "$INITRD"
  rm -rf "$T"
  trap - EXIT
fi

ACCEL=${CUFF_VM_ACCEL:-auto}
if [ "$ACCEL" = auto ]; then
  ACCEL=tcg
  if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ]; then ACCEL=kvm; fi
fi
if [ "$ACCEL" = kvm ]; then ACCEL_ARGS=(-accel kvm -cpu host); else ACCEL_ARGS=(-accel tcg,thread=multi -cpu max); fi

# The guest command, with the CUFF_* environment, as a script the guest runs in $OUT.
{
  export -p | grep -E '^declare -x CUFF_' || true
  echo "export CUFF_REPO=$(printf %q "$REPO")"
  if [ $# -gt 0 ]; then printf '%q ' "$@"; echo; else echo "$(printf %q "$HERE/guest-tests.sh")"; fi
} > "$OUT/.guest-cmd"
rm -f "$OUT/guest-rc"

echo "cuff-vm: kernel $KVER, accel $ACCEL, timeout ${TIMEOUT}s, out $OUT"
start=$(date +%s.%N)
set +e
timeout -k 5 "$TIMEOUT" qemu-system-x86_64 \
  -no-user-config -nodefaults -display none -no-reboot \
  -machine q35 "${ACCEL_ARGS[@]}" -smp "${CUFF_VM_SMP:-2}" -m "${CUFF_VM_MEM:-1024}" \
  -serial stdio -monitor none \
  -kernel "/boot/vmlinuz-$KVER" -initrd "$INITRD" \
  -append "console=ttyS0 quiet loglevel=4 panic=-1 cuff.stage2=$HERE/stage2.sh cuff.out=$OUT" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$OUT,mount_tag=outshare,security_model=none,multidevs=remap" \
  </dev/null 2>&1 | tr -d '\r' | tee "$OUT/console.log"
qrc=${PIPESTATUS[0]}
set -e
printf 'cuff-vm: wall %.1f s (qemu exit %s)\n' "$(echo "$(date +%s.%N) - $start" | bc)" "$qrc"
if [ "$qrc" = 124 ]; then echo "cuff-vm: VM timed out after ${TIMEOUT}s" >&2; exit 124; fi
[ -f "$OUT/guest-rc" ] || { echo "cuff-vm: the guest reported no exit status (see $OUT/console.log)" >&2; exit 125; }
rc=$(cat "$OUT/guest-rc")
echo "cuff-vm: guest command exit status $rc"
exit "$rc"
