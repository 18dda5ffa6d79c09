#!/bin/bash
# In the guest: load hci_vhci, start btmon (capture.btsnoop in the out dir) and two btvirt LE
# controllers that see each other, export CUFF_BT_HARDWARE=1, CUFF_BT_PERIPHERAL (first new
# controller) and CUFF_BT_CENTRAL (second), run "$@", tear down, decode the capture.
set -u
T0=$(date +%s.%N)
say() { printf '[guest %6.2f] %s\n' "$(echo "$(date +%s.%N) - $T0" | bc)" "$*"; }

modprobe bluetooth || { say "modprobe bluetooth failed"; exit 125; }
modprobe hci_vhci || { say "modprobe hci_vhci failed"; exit 125; }
rm -f capture.btsnoop capture.txt dmesg-setup-attempts.txt
# btmon writes to the guest's tmpfs, not the 9p out share, and ahead of the rest: a btmon that
# stalls lets the kernel's monitor socket overflow, which drops packets silently (a capture that
# lost a session's last indications while the live run got them was seen). Copied out at the end.
CAPTURE=/tmp/cuff-capture.btsnoop
rm -f "$CAPTURE"
nice -n -10 btmon -w "$CAPTURE" > /dev/null 2> btmon.log &
BTMON=$!
# btvirt -L -l2: two LE controllers in one process, so they see each other. Under TCG on a busy
# host btvirt can answer the kernel's first HCI Reset of a controller too late ("Opcode 0x0c03
# failed: -110"); that controller then never finishes its setup and MGMT calls it an invalid
# index. Nothing brings it back but a new controller: restart btvirt (up to 3 times).
listed() { btmgmt info 2>/dev/null | grep -q "^$1:"; }
BTVIRT=; P=; C=
for attempt in 1 2 3; do
  ls /sys/class/bluetooth 2>/dev/null | sort > /tmp/hci.before
  btvirt -L -l2 >> btvirt.log 2>&1 &
  BTVIRT=$!
  new=
  for _ in $(seq 200); do
    ls /sys/class/bluetooth 2>/dev/null | sort > /tmp/hci.now
    new=$(comm -13 /tmp/hci.before /tmp/hci.now | grep -E '^hci[0-9]+$' | sort -V)
    [ "$(echo "$new" | grep -c hci)" -ge 2 ] && break
    sleep 0.05
  done
  P=$(echo "$new" | sed -n 1p); C=$(echo "$new" | sed -n 2p)
  ok=0
  if [ -n "$P" ] && [ -n "$C" ]; then
    for _ in $(seq 16); do
      listed "$P" && listed "$C" && { ok=1; break; }
      dmesg | grep -qE "($P|$C): Opcode 0x0c03 failed" && break   # a lost HCI Reset: don't wait
      sleep 0.5
    done
  fi
  [ $ok = 1 ] && break
  dmesg >> dmesg-setup-attempts.txt; dmesg -C
  say "attempt $attempt: controllers '${P:-none}' '${C:-none}' did not finish their setup; restarting btvirt"
  kill "$BTVIRT" 2>/dev/null; wait "$BTVIRT" 2>/dev/null
  for _ in $(seq 50); do [ -e "/sys/class/bluetooth/$P" ] || break; sleep 0.1; done
  P=; C=
done
if [ -z "$P" ] || [ -z "$C" ]; then say "btvirt gave no two working controllers (see btvirt.log, dmesg)"; dmesg > dmesg.txt; exit 125; fi
export CUFF_BT_HARDWARE=1 CUFF_BT_PERIPHERAL=$P CUFF_BT_CENTRAL=$C
say "kernel $(uname -r); controllers: peripheral $P, central $C; btmon → capture.btsnoop"

"$@"
rc=$?
say "command exit status $rc"

kill "$BTVIRT" 2>/dev/null; wait "$BTVIRT" 2>/dev/null
kill -INT "$BTMON" 2>/dev/null; wait "$BTMON" 2>/dev/null
cp "$CAPTURE" capture.btsnoop
btmon -r capture.btsnoop > capture.txt 2>&1
dmesg > dmesg.txt
if grep -qE 'kernel BUG|Oops|general protection|list_del corruption' dmesg.txt; then
  say "KERNEL BUG during the run (see dmesg.txt):"
  grep -E -A3 'kernel BUG|Oops|general protection|list_del corruption' dmesg.txt | head -8
  [ $rc = 0 ] && rc=4
fi
say "capture: $(stat -c %s capture.btsnoop 2>/dev/null || echo 0) bytes, $(grep -c 'ATT:' capture.txt) ATT lines, $(grep -c 'SMP:' capture.txt) SMP lines"
exit $rc
