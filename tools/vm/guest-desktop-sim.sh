#!/bin/bash
# In the guest: the simulated cuff on a "desktop" through bluetoothd, as a user who is not root.
#
#   tools/vm/run.sh -- bash -c '"$CUFF_REPO/tools/vm/guest-desktop-sim.sh"'
#
# dbus-daemon --system and bluetoothd first (Debian's policy: the `bluetooth` group may call
# org.bluez; bluetoothd, as root, may call an application's GATT and advertisement interfaces).
# Then `cuff simulate --backend bluetoothd --adapter P` as user cuffsim (uid 4242, made here, in the
# `bluetooth` group; setpriv: no root, no capabilities; the binary copied where that user may run
# it, since a clone may lie in a directory only root can enter), and as clients on the central C:
#   1. the simulator registered its GATT application and advertisement;
#   2. `cuff measure ADDR --backend raw` and 3. `cuff measure ADDR --backend bluetoothd` each get a
#      measurement with the exact values the same cuff (scenario, seed) gives over a Unix socket;
#   4. bluetoothctl's gatt menu: read 2A49, notify 2A36, indicate 2A35 (exact values; it prints
#      only the selected attribute's values, so it selects 2A36, then 2A35, during the measurement);
#      (bluetoothd confirms the indication: the cuff either saw that confirmation, or bluetoothctl
#      hung up first and bluetoothd never had one, and the cuff keeps the reading for the next client);
#   5. a client that hangs up without confirming the indicated reading (att_no_confirm.py), and
#      6. the next client gets that same reading again first;
#   7. `cuff watch --device ADDR` (through bluetoothd) collects the next reading into its store;
#   8. bluetoothd restarted: the simulator waits, registers again, and 9. serves a measure again;
#   10. SIGINT: it unregisters and exits 0.
# One JSON line per step in desktop-sim-results.jsonl; exit status = number of failed steps.
set -u
. "${CUFF_REPO:?run through tools/vm/run.sh}/tools/vm/guest-lib.sh"
guest_init desktop-sim --need-cuff
rm -f desktop-sim-results.jsonl dsim-diagnosis.txt
fails=0
result() {  # STEP OK(true/false) EXTRA-JSON
  printf '{"step":"%s","ok":%s%s}\n' "$1" "$2" "${3:+,$3}" >> desktop-sim-results.jsonl
  say "$1: $($2 && echo PASS || echo FAIL) ${3:-}"
  $2 || fails=$((fails + 1))
}
SIMARGS=(--scenario normal --seed 1 --speed 6 --autostart)
N_REF=9

# The reference: the same cuff over a Unix socket, measured in the guest. The cuff measures anew
# for each measurement (the seed's 1st, 2nd, 3rd reading, …): N_REF clients, one after the other.
"$CUFF" simulate --listen unix:/tmp/ref.sock "${SIMARGS[@]}" > /dev/null 2> dsim-ref-sim.log &
REF=$!
for _ in $(seq 100); do [ -S /tmp/ref.sock ] && break; sleep 0.05; done
for i in $(seq $N_REF); do
  timeout 60 "$CUFF" measure --connect unix:/tmp/ref.sock > "dsim-ref-$i.ndjson" 2> "dsim-ref-$i.log"
done
kill -INT "$REF" 2>/dev/null; wait "$REF" 2>/dev/null
values() {  # FILE [N]: the Nth measurement's values (default the first), one line
  python3 -c '
import json, sys
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "measurement":
        n -= 1
        if n == 0:
            print(json.dumps({k: r.get(k) for k in ("systolic", "diastolic", "mean_arterial_pressure", "pulse_rate", "status", "user_id")}, sort_keys=True))
            break
' "$@" 2>/dev/null
}
REFV=("")
for i in $(seq $N_REF); do REFV+=("$(values "dsim-ref-$i.ndjson")"); done
say "reference values: ${REFV[1]:-none} / ${REFV[2]:-none} / ${REFV[3]:-none} / …"

# A user who is not root, in the `bluetooth` group: dbus-daemon looks the caller's groups up in
# /etc/passwd and /etc/group (not the process's), and the guest's root is read-only: bind copies.
cp /etc/passwd /tmp/passwd.guest && echo 'cuffsim:x:4242:4242:cuff simulator:/tmp:/bin/sh' >> /tmp/passwd.guest
sed -e '/^bluetooth:/ s/$/,cuffsim/' -e '/^bluetooth:/ s/:,cuffsim$/:cuffsim/' /etc/group > /tmp/group.guest
echo 'cuffsim:x:4242:' >> /tmp/group.guest
mount --bind /tmp/passwd.guest /etc/passwd && mount --bind /tmp/group.guest /etc/group
say "user: $(id cuffsim 2>&1)"
# The clone (and so its build) may lie below a directory only root may enter (mktemp -d is 0700):
# the user runs a copy of the binary from a directory of its own, as an installed cuff would be.
install -d -m 755 /tmp/cuffsim-bin && install -m 755 "$CUFF" /tmp/cuffsim-bin/cuff
start_desktop
btmgmt -i "$P" power on > /dev/null 2>&1
btmgmt -i "$C" power on > /dev/null 2>&1
PADDR=$(hciconfig "$P" | awk '/BD Address/{print $3}')
CADDR=$(hciconfig "$C" | awk '/BD Address/{print $3}')
BTGID=$(getent group bluetooth | cut -d: -f3)
say "bluetoothd $BTD; cuff (simulated, uid 4242, group bluetooth=$BTGID) on $P $PADDR; client on $C $CADDR"

# 1. The simulator as a user who is not root (working directory its own: the results folder may
# be closed to it too).
(cd /tmp && exec setpriv --reuid=4242 --regid=4242 --groups="$BTGID" env HOME=/tmp \
  /tmp/cuffsim-bin/cuff simulate --backend bluetoothd --adapter "$P" "${SIMARGS[@]}") > dsim-sim.ndjson 2> dsim-sim.log &
SIM=$!
for _ in $(seq 150); do grep -q 'registered the advertisement' dsim-sim.log && break; kill -0 "$SIM" 2>/dev/null || break; sleep 0.1; done
ok=false; grep -q 'registered the application' dsim-sim.log && grep -q 'registered the advertisement' dsim-sim.log && kill -0 "$SIM" 2>/dev/null && ok=true
result registered-as-non-root $ok "\"uid\":$(ps -o uid= -p "$SIM" 2>/dev/null | tr -d ' ' || echo null)"
if ! $ok; then
  # Nothing below can pass without the simulator: say why at once and stop.
  say "simulator log:"; sed 's/^/    /' dsim-sim.log | head -40
  kill -KILL "$SIM" 2>/dev/null
  kill "$BTD" "$DBUS" 2>/dev/null; wait "$BTD" "$DBUS" 2>/dev/null
  umount /etc/group /etc/passwd 2>/dev/null
  exit $((fails + 9))
fi

NEXT=1   # the reading the simulated cuff measures next (its Nth measurement)
check() {  # STEP FILE N EXIT: the Nth measurement of FILE has reference NEXT's values
  local v ok=false
  v=$(values "$2" "$3")
  [ "$4" = 0 ] && [ -n "${REFV[$NEXT]:-}" ] && [ "$v" = "${REFV[$NEXT]}" ] && ok=true
  result "$1" $ok "\"exit\":$4,\"reading\":$NEXT,\"values\":${v:-null}"
}
count() { local n; n=$(grep -c "$1" "$2" 2>/dev/null); echo "${n:-0}"; }  # PATTERN FILE: matching lines
wait_count() {  # PATTERN FILE N SECONDS: until FILE has N lines matching PATTERN
  local i
  for i in $(seq $(($4 * 10))); do [ "$(count "$1" "$2")" -ge "$3" ] && return 0; sleep 0.1; done
  return 1
}
measure() {  # NAME BACKEND
  sleep 3  # the simulated cuff switches off after each measurement, as real ones do
  timeout 90 "$CUFF" measure "$PADDR" --adapter "$C" --backend "$2" > "dsim-measure-$1.ndjson" 2> "dsim-measure-$1.log"
  local rc=$?
  check "measure-$1" "dsim-measure-$1.ndjson" 1 $rc
  tail -n 1 desktop-sim-results.jsonl | grep -q '"ok":true' || grep -iE 'error|fail|busy|timed' "dsim-measure-$1.log" | sed 's/^/    /' | head -6
  NEXT=$((NEXT + 1))
}
# 2, 3.
measure raw raw
measure bluetoothd bluetoothd

# 4. bluetoothctl, the client every desktop has: its gatt menu reads 2A49, subscribes to 2A36
# (notify) and 2A35 (indicate: bluetoothd confirms), and prints what arrives.
sleep 3
CONF0=$(count 'GATT server received confirmation' bluetoothd.log)
DONE0=$(count 'measurement done' dsim-sim.log)
ENDED0=$(count 'connection ended' dsim-sim.log)
SIMLINES0=$(wc -l < dsim-sim.log)
# What bluetoothd and the cuff say to each other on the bus meanwhile (said when this step fails).
MON=
if command -v dbus-monitor > /dev/null; then
  dbus-monitor --system "type='method_call',member='Confirm'" "type='signal',member='PropertiesChanged',arg0='org.bluez.Device1'" \
    > dsim-btctl-dbus.txt 2>&1 &
  MON=$!
fi
rm -f /tmp/btctl.in; mkfifo /tmp/btctl.in
# On a terminal of its own (script: a pty), as a person runs it: without one bluetoothctl stops
# reading its input after the first command that waits for bluetoothd.
script -qfec bluetoothctl /dev/null < /tmp/btctl.in > dsim-btctl.raw 2>&1 &
BTCTL=$!
exec 7> /tmp/btctl.in
ctl() { echo "$1" >&7; sleep "${2:-1}"; }
btlog() { sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' -e 's/\x01\|\x02//g' dsim-btctl.raw; }
ctl "select $CADDR"
# bluetoothctl keeps the GATT objects of the devices of its default controller when it starts
# (the first one, P here) and drops the rest: the cuff's, known on C since the measures, would
# never show. Forgotten on C, it is found and connected anew, its services listed as they appear.
ctl "remove $PADDR" 2
ctl "scan le" 0
# Starting discovery drops the devices bluetoothd had only seen ([DEL]); wait until the cuff's
# advertising brings it back (bluetoothd makes no object for a device whose advertising is not
# discoverable: the simulator's says General Discoverable). btvirt reports an advertiser to a
# scanner only when advertising or scanning is switched on (a radio hears it every interval), and
# that report can come before the kernel counts its discovery as running, which drops it: switch
# the cuff's advertising on again (it is on; the kernel uses legacy advertising on btvirt) until
# bluetoothctl hears it.
for i in $(seq 150); do
  btlog | grep -qE "\[(NEW|CHG)\] Device $PADDR" && break
  [ $((i % 10)) = 0 ] && hcitool -i "$P" cmd 0x08 0x000a 01 > /dev/null 2>&1
  sleep 0.2
done
ctl "scan off"
ctl "connect $PADDR" 0
for _ in $(seq 150); do btlog | grep -q 'ServicesResolved: yes' && break; sleep 0.2; done
ctl "menu gatt"
ctl "list-attributes $PADDR" 2
path_of() {  # UUID16: the object path bluetoothctl listed for that characteristic of the cuff
  btlog | python3 -c '
import re, sys
dev, uuid = sys.argv[1], "0000%s-0000-1000-8000-00805f9b34fb" % sys.argv[2]
path = None
for line in sys.stdin:
    m = re.search(r"(/org/bluez/hci[0-9]+/dev_%s/service[0-9a-f]+/char[0-9a-f]+)\s*$" % dev, line)
    if m:
        path = m.group(1)
    elif path and uuid in line.lower():
        print(path)
        break
    elif line.strip():
        path = None
' "${PADDR//:/_}" "$1"
}
P2A49=$(path_of 2a49); P2A36=$(path_of 2a36); P2A35=$(path_of 2a35)
say "bluetoothctl paths: 2A49 ${P2A49:-?} 2A36 ${P2A36:-?} 2A35 ${P2A35:-?}"
ctl "select-attribute $P2A49"
ctl "read" 2
ctl "select-attribute $P2A36"
ctl "notify on"
ctl "select-attribute $P2A35"
ctl "notify on" 0
# bluetoothctl prints a characteristic's new values only while it is the selected attribute
# (client/main.c: property_changed, `proxy == default_attr`): watch 2A36 during the inflation,
# then 2A35 for the result.
ctl "select-attribute $P2A36" 0
for _ in $(seq 50); do btlog | grep -q "$P2A36 Value:" && break; sleep 0.1; done
ctl "select-attribute $P2A35" 0
for _ in $(seq 200); do btlog | grep -q "$P2A35 Value:" && break; sleep 0.2; done
sleep 1
ctl "back"
ctl "disconnect $PADDR" 2
ctl "quit" 0
exec 7>&-
stop "$BTCTL" TERM
btlog > dsim-btctl.log
# The bytes bluetoothctl printed after "PATH Value:" (hex dump lines) of one attribute, as hex.
value_hex() {  # PATH [Nth]
  python3 - "$1" "${2:-1}" <<'PY'
import re, sys
path, nth = sys.argv[1], int(sys.argv[2])
lines = open("dsim-btctl.log", errors="replace").read().splitlines()
found = []
for i, line in enumerate(lines):
    if path and path in line and line.rstrip().endswith("Value:"):
        hexes = []
        for l in lines[i + 1:]:
            # bluetoothctl prints its prompt again between the "Value:" line and the dump lines.
            if re.match(r"^\[[^]]*\]#\s*$", l.strip()) or not l.strip():
                continue
            m = re.match(r"^\s*((?:[0-9a-f]{2} ){1,16})", l.strip() + " ")
            if not m or "Value:" in l:
                break
            hexes += m.group(1).split()
            if len(m.group(1).split()) < 16:
                break  # a dump's last line (it prints the value read twice: take one)
        if hexes:
            found.append("".join(hexes))
print(found[nth - 1] if len(found) >= nth else "")
PY
}
H2A49=$(value_hex "$P2A49"); H2A36=$(value_hex "$P2A36"); H2A35=$(value_hex "$P2A35")
ok=false; [ ${#H2A49} = 4 ] && ok=true
result bluetoothctl-read-2a49 $ok "\"value\":\"$H2A49\""
ok=false; [ -n "$H2A36" ] && "$CUFF" decode --characteristic 2a36 "$H2A36" > /dev/null 2>&1 && ok=true
result bluetoothctl-notify-2a36 $ok "\"first\":\"$H2A36\""
echo "$H2A35" > dsim-btctl-2a35.hex
"$CUFF" decode "$H2A35" > dsim-btctl-2a35.ndjson 2>/dev/null
check bluetoothctl-indicate-2a35 dsim-btctl-2a35.ndjson 1 $([ -n "$H2A35" ] && echo 0 || echo 1)
# bluetoothd confirms the indication for bluetoothctl; the cuff then counts the reading as sent.
# Under emulation (TCG) bluetoothctl may hang up before that confirmation reaches the cuff, which
# then keeps the reading and sends it to the next client first, as it should. Wait until the cuff
# has seen the link end, then say which happened: the reading the next client gets depends on it.
# Only bluetoothd having received the confirmation without the cuff acting on it is a failure.
wait_count 'connection ended' dsim-sim.log $((ENDED0 + 1)) 30
confs=$(($(count 'GATT server received confirmation' bluetoothd.log) - CONF0))
done3=$(($(count 'measurement done' dsim-sim.log) - DONE0))
ok=false; { [ "$done3" -ge 1 ] || [ "$confs" -eq 0 ]; } && ok=true
result bluetoothctl-confirmation $ok "\"cuff_confirmed\":$([ "$done3" -ge 1 ] && echo true || echo false),\"bluetoothd_confirmations\":$confs"
[ -n "$MON" ] && stop "$MON" TERM
if ! $ok; then  # (printed last, where a failed run's tail shows it)
  {
    echo "bluetoothctl-confirmation failed. The cuff's log since bluetoothctl connected:"
    tail -n +$((SIMLINES0 + 1)) dsim-sim.log | head -30
    echo "bluetoothd's indications and confirmations:"
    grep -nE 'sending indication|received confirmation|dev_disconnected' bluetoothd.log | tail -n 8
    echo "Confirm calls and Device1 changes on the bus:"
    grep -E 'member=Confirm|member=PropertiesChanged' dsim-btctl-dbus.txt 2>/dev/null | tail -n 12
  } | sed 's/^/    /' > dsim-diagnosis.txt
fi
[ "$done3" -ge 1 ] && NEXT=$((NEXT + 1))

# 5. A client that hangs up without confirming the reading it was indicated.
sleep 3
timeout 90 /usr/bin/python3 "$REPO/tools/vm/att_no_confirm.py" "$CADDR" "$PADDR" 60 > dsim-noconfirm.hex 2> dsim-noconfirm.log
nrc=$?
"$CUFF" decode "$(head -n 1 dsim-noconfirm.hex)" > dsim-noconfirm.ndjson 2>/dev/null
check indication-not-confirmed dsim-noconfirm.ndjson 1 $nrc
UNCONFIRMED=$NEXT
NEXT=$((NEXT + 1))
# 6. The next client is sent that reading again first (then the cuff measures anew).
sleep 3
timeout 90 "$CUFF" measure "$PADDR" --adapter "$C" --backend raw > dsim-measure-resent.ndjson 2> dsim-measure-resent.log
mrc=$?
SAVED=$NEXT; NEXT=$UNCONFIRMED
check unconfirmed-reading-resent dsim-measure-resent.ndjson 1 $mrc
NEXT=$SAVED
check then-measures-anew dsim-measure-resent.ndjson 2 $mrc
NEXT=$((NEXT + 1))

# 7. cuff watch through bluetoothd (auto) collects the next reading into its store.
sleep 3
DB=/tmp/dsim-watch.db; rm -f "$DB"*
"$CUFF" watch --adapter "$C" --device "$PADDR" --store "$DB" > dsim-watch.ndjson 2> dsim-watch.log &
W=$!
for _ in $(seq 240); do grep -q '"type":"measurement"' dsim-watch.ndjson 2>/dev/null && break; kill -0 "$W" 2>/dev/null || break; sleep 0.25; done
sleep 1
kill -TERM "$W" 2>/dev/null
for _ in $(seq 80); do kill -0 "$W" 2>/dev/null || break; sleep 0.1; done
kill -KILL "$W" 2>/dev/null; wait "$W"; wrc=$?
check watch-collects dsim-watch.ndjson 1 $wrc
stored=$("$CUFF" history --store "$DB" 2>/dev/null | grep -c '"systolic"')
watched=$(grep -c '"type":"measurement"' dsim-watch.ndjson)
ok=false; [ "${stored:-0}" -ge 1 ] && [ "$stored" = "$watched" ] && grep -q 'backend: bluetoothd' dsim-watch.log && ok=true
result watch-stores-through-bluetoothd $ok "\"stored\":${stored:-0},\"printed\":$watched"
NEXT=$((NEXT + watched))

# 8. bluetoothd restarted under the simulator.
kill "$BTD" 2>/dev/null; wait "$BTD" 2>/dev/null
"$BTD_BIN" -n -d > bluetoothd-2.log 2>&1 &
BTD=$!
wait_count 'registered the advertisement' dsim-sim.log 2 20
ok=false; kill -0 "$SIM" 2>/dev/null && grep -q 'registering again' dsim-sim.log && [ "$(grep -c 'registered the application' dsim-sim.log)" -ge 2 ] && ok=true
result re-registers-after-bluetoothd-restart $ok
btmgmt -i "$C" power on > /dev/null 2>&1
# 9.
measure after-restart raw

# 10. Ctrl-C.
kill -INT "$SIM" 2>/dev/null
src=-1
wait_gone "$SIM"
if ! kill -0 "$SIM" 2>/dev/null; then wait "$SIM"; src=$?; else kill -KILL "$SIM"; fi
ok=false; [ "$src" = 0 ] && grep -q 'unregistered' dsim-sim.log && ok=true
result unregisters-on-sigint $ok "\"exit\":$src"
say "simulator log:"; sed 's/^/    /' dsim-sim.log | head -40
kill "$BTD" 2>/dev/null; wait "$BTD" 2>/dev/null
kill "$DBUS" 2>/dev/null; wait "$DBUS" 2>/dev/null
umount /etc/group /etc/passwd 2>/dev/null
[ -s dsim-diagnosis.txt ] && cat dsim-diagnosis.txt
say "$fails failed (desktop-sim-results.jsonl)"
exit $fails
