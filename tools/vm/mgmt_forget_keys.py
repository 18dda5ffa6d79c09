#!/usr/bin/python3
"""In the guest: make the kernel forget every LTK and IRK of one controller, as a reboot does
(MGMT Load Long Term Keys and Load IRKs with no keys, what bluetoothd sends at start with an
empty store). For the raw path's bonded-reconnect test.

  mgmt_forget_keys.py hci1
"""
import ctypes, ctypes.util, select, socket, struct, sys
AF_BLUETOOTH, BTPROTO_HCI, HCI_CHANNEL_CONTROL, HCI_DEV_NONE = 31, 1, 3, 0xFFFF
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
index = int(sys.argv[1].removeprefix("hci"))
s = socket.socket(AF_BLUETOOTH, socket.SOCK_RAW | socket.SOCK_CLOEXEC, BTPROTO_HCI)
sa = ctypes.create_string_buffer(struct.pack("<HHH", AF_BLUETOOTH, HCI_DEV_NONE, HCI_CHANNEL_CONTROL), 6)
if libc.bind(s.fileno(), sa, 6) != 0:
    sys.exit("bind: errno %d" % ctypes.get_errno())
status = {}
for opcode in (0x0013, 0x0030):  # Load Long Term Keys, Load Identity Resolving Keys: count 0
    s.send(struct.pack("<HHH", opcode, index, 2) + b"\0\0")
    while opcode not in status:
        r, _, _ = select.select([s], [], [], 5)
        if not r:
            sys.exit("no reply to 0x%04x" % opcode)
        pkt = s.recv(1024)
        code, idx, _ = struct.unpack_from("<HHH", pkt)
        if code in (1, 2) and idx == index:
            op, st = struct.unpack_from("<HB", pkt, 6)
            if op == opcode:
                status[opcode] = st
print("forgot keys on hci%d: %s" % (index, {hex(k): v for k, v in status.items()}))
sys.exit(0 if all(v == 0 for v in status.values()) else 1)
