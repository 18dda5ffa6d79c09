#!/usr/bin/python3
# A GATT client that never confirms, for the VM: over a raw LE L2CAP ATT channel (CID 4) it finds
# the Blood Pressure Measurement characteristic (2A35) and its CCCD, subscribes to indications
# (and to 2A36's notifications, as every client in the test does),
# waits for the first indication, prints its value as hex on stdout and hangs up WITHOUT sending
# the Handle Value Confirmation. A faithful cuff must then send that reading again to the next
# client (the Blood Pressure Service keeps a stored reading until it is confirmed).
#
#   att_no_confirm.py LOCAL-ADDRESS PEER-ADDRESS [TIMEOUT-SECONDS]
#
# Exit status: 0 an indication arrived (not confirmed), 1 none within the time, 2 setup failed.
# Written against the Core specification's ATT PDUs (Vol 3 Part F) and Linux's <bluetooth/l2cap.h>.
import ctypes, ctypes.util, os, select, socket, struct, sys, time

AF_BLUETOOTH, BTPROTO_L2CAP = 31, 0
ATT_CID = 4
BDADDR_LE_PUBLIC, BDADDR_LE_RANDOM = 1, 2
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def sockaddr_l2(address, addr_type):
    # struct sockaddr_l2 { sa_family_t; __le16 psm; bdaddr_t (little-endian); __le16 cid; __u8 type; }
    octets = bytes(int(b, 16) for b in reversed(address.split(":")))
    return struct.pack("<HH6sHB", AF_BLUETOOTH, 0, octets, ATT_CID, addr_type)


def open_channel(local, peer):
    last = None
    for peer_type in (BDADDR_LE_PUBLIC, BDADDR_LE_RANDOM):
        s = socket.socket(AF_BLUETOOTH, socket.SOCK_SEQPACKET, BTPROTO_L2CAP)
        a = sockaddr_l2(local, BDADDR_LE_PUBLIC)
        if libc.bind(s.fileno(), a, len(a)) != 0:
            raise OSError(ctypes.get_errno(), "bind " + os.strerror(ctypes.get_errno()))
        b = sockaddr_l2(peer, peer_type)
        # A blocking connect (the kernel's LE connect timeout): a socket timeout would make the
        # raw connect() below return EINPROGRESS at once.
        if libc.connect(s.fileno(), b, len(b)) == 0:
            return s
        last = OSError(ctypes.get_errno(), "connect " + os.strerror(ctypes.get_errno()))
        s.close()
    raise last


def request(s, pdu, want, deadline):
    s.send(pdu)
    while time.time() < deadline:
        r, _, _ = select.select([s], [], [], max(0.0, deadline - time.time()))
        if not r:
            break
        rsp = s.recv(517)
        if rsp and rsp[0] in (want, 0x01):
            return rsp
    raise TimeoutError("no answer to ATT opcode 0x%02x" % pdu[0])


def main():
    local, peer = sys.argv[1], sys.argv[2]
    timeout = float(sys.argv[3]) if len(sys.argv) > 3 else 60
    deadline = time.time() + timeout
    try:
        s = open_channel(local, peer)
        s.setblocking(True)
        # Characteristic declarations (Read By Type 0x2803), page by page.
        chars, start = [], 1
        while start <= 0xFFFF:
            rsp = request(s, struct.pack("<BHHH", 0x08, start, 0xFFFF, 0x2803), 0x09, deadline)
            if rsp[0] == 0x01:
                break
            size = rsp[1]
            for i in range(2, len(rsp) - size + 1, size):
                handle, props, value_handle = struct.unpack_from("<HBH", rsp, i)
                uuid = struct.unpack_from("<H", rsp, i + 5)[0] if size == 7 else None
                chars.append((handle, value_handle, uuid))
            start = chars[-1][0] + 1
        def cccd_of(uuid):
            """The characteristic's value handle and its CCCD (Find Information over its descriptors)."""
            found = [c for c in chars if c[2] == uuid]
            if not found:
                return None, None
            later = [c[0] for c in chars if c[0] > found[0][0]]
            end = (later[0] - 1) if later else 0xFFFF
            rsp = request(s, struct.pack("<BHH", 0x04, found[0][1] + 1, end), 0x05, deadline)
            if rsp[0] == 0x05 and rsp[1] == 0x01:
                for i in range(2, len(rsp) - 3, 4):
                    h, u = struct.unpack_from("<HH", rsp, i)
                    if u == 0x2902:
                        return found[0][1], h
            return found[0][1], None

        value_handle, cccd = cccd_of(0x2A35)
        if value_handle is None:
            print("no Blood Pressure Measurement characteristic", file=sys.stderr)
            return 2
        if cccd is None:
            print("no CCCD for 2A35", file=sys.stderr)
            return 2
        # The cuff's pressure too, as every client in the VM test subscribes: the simulated cuff
        # draws its seeded noise only for samples someone receives, so its later readings then
        # follow the same sequence as the reference's.
        _, icp_cccd = cccd_of(0x2A36)
        if icp_cccd is not None:
            request(s, struct.pack("<BHH", 0x12, icp_cccd, 0x0001), 0x13, deadline)
        rsp = request(s, struct.pack("<BHH", 0x12, cccd, 0x0002), 0x13, deadline)
        if rsp[0] != 0x13:
            print("subscribing was refused: %s" % rsp.hex(), file=sys.stderr)
            return 2
        print("subscribed to 2A35 (value 0x%04x, CCCD 0x%04x)" % (value_handle, cccd), file=sys.stderr)
    except OSError as e:
        print("att_no_confirm: %s" % e, file=sys.stderr)
        return 2
    while time.time() < deadline:
        r, _, _ = select.select([s], [], [], max(0.0, deadline - time.time()))
        if not r:
            break
        pdu = s.recv(517)
        if not pdu:
            break
        if pdu[0] == 0x1D and struct.unpack_from("<H", pdu, 1)[0] == value_handle:
            print(pdu[3:].hex())
            sys.stdout.flush()
            s.close()  # hang up without the confirmation (0x1E)
            return 0
        if pdu[0] == 0x02:  # the peer's MTU request: the default MTU
            s.send(struct.pack("<BH", 0x03, 23))
        elif pdu[0] in (0x04, 0x06, 0x08, 0x0A, 0x0C, 0x0E, 0x10, 0x12, 0x16, 0x18, 0x20):
            # Any other request of the peer's: not supported, so the cuff does not wait on us.
            s.send(struct.pack("<BBHB", 0x01, pdu[0], 0, 0x06))
    print("no indication within %.0f s" % timeout, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
