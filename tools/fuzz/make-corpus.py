#!/usr/bin/env python3
"""Writes the fuzz seed corpus (tools/fuzz/corpus/<Target>/) from the captures/ fixtures and the
public vectors in ../shared/spec/vectors.md (or $CUFF_SHARED_DIR/spec/vectors.md).

  python3 tools/fuzz/make-corpus.py

Seeds are named seed-<what>; files the fuzzer found (crash-*, regression-*) are left alone."""
import glob, hashlib, os, re, struct, sys

root = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
shared = os.environ.get("CUFF_SHARED_DIR", os.path.join(root, "..", "shared"))
corpus = os.path.join(root, "tools", "fuzz", "corpus")

# Characteristic order as in BPSCharacteristic.allCases (FuzzCodecs uses byte 0 % 9).
CHARS = ["2A35", "2A36", "2A49", "2B34", "2B35", "2B36", "2A52", "2A08", "2A2B"]
SERVER_OPCODES = {0x01, 0x03, 0x05, 0x07, 0x09, 0x0B, 0x0D, 0x0F, 0x11, 0x13, 0x17, 0x19, 0x1B, 0x1D}


def write(target, name, data):
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(bytes(data))


def att_pdus(path):
    """(direction, ATT PDU) for each LE ACL frame on CID 4 in a btsnoop (H4 1002 or monitor 2001)."""
    data = open(path, "rb").read()
    datalink = struct.unpack(">I", data[12:16])[0]
    pos, out = 16, []
    while pos + 24 <= len(data):
        _, incl, flags, _, _ = struct.unpack(">IIIIq", data[pos:pos + 24])
        rec = data[pos + 24:pos + 24 + incl]
        pos += 24 + incl
        if datalink == 2001:
            opcode = flags & 0xFFFF
            if opcode not in (4, 5):
                continue
            acl, rx = rec, opcode == 5
        elif datalink == 1002:
            if not rec or rec[0] != 2:
                continue
            acl, rx = rec[1:], bool(flags & 1)
        else:
            continue
        if len(acl) < 8:
            continue
        l2len, cid = struct.unpack("<HH", acl[4:8])
        if cid == 4:
            out.append((rx, acl[8:8 + l2len]))
    return out


def main():
    # Codecs: every vector in vectors.md whose Char column names a characteristic.
    vectors = open(os.path.join(shared, "spec", "vectors.md"), encoding="utf-8").read()
    n = 0
    for line in vectors.splitlines():
        cols = [c.strip() for c in line.split("|")]
        if len(cols) < 5 or not cols[1].startswith("V"):
            continue
        char = cols[2][:4].upper()
        if char not in CHARS:
            continue
        for i, hexes in enumerate(re.findall(r"`([0-9A-Fa-f ]+)`", cols[3])):
            value = bytes.fromhex(hexes)
            for quirks in (0,) if char not in ("2A35", "2A36") else (0, 3):
                write("FuzzCodecs", f"{cols[1]}-{i}-q{quirks}", [CHARS.index(char), quirks] + list(value))
                n += 1
    # ATT PDUs, the GATT client's server side and the captures themselves.
    seen = set()
    for path in sorted(glob.glob(os.path.join(root, "captures", "*.btsnoop"))):
        name = os.path.basename(path).rsplit(".", 1)[0]
        raw = open(path, "rb").read()
        write("FuzzCapture", name + "-auto", b"\x00" + raw)
        pdus = att_pdus(path)
        for _, pdu in pdus:
            h = hashlib.sha1(pdu).hexdigest()[:12]
            if pdu and (pdu[0], len(pdu)) not in seen:
                seen.add((pdu[0], len(pdu)))
                write("FuzzATT", h, pdu)
        script = bytearray()
        for _, pdu in pdus:
            if pdu and pdu[0] in SERVER_OPCODES and len(pdu) < 256:
                script += bytes([0, len(pdu)]) + pdu
            elif pdu and pdu[0] == 0x1E:  # the client confirms indications
                script += b"\x04"
        write("FuzzGATTClient", name, script)
    # pcap and pcapng versions of two captures (editcap, from Wireshark), read with the format named.
    import shutil, subprocess, tempfile
    if shutil.which("editcap"):
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("normal", "stored-records-bps-1.1"):
                for fmt, byte in (("pcap", 2), ("pcapng", 3)):
                    dst = os.path.join(tmp, name + "." + fmt)
                    subprocess.run(["editcap", "-F", fmt, os.path.join(root, "captures", name + ".btsnoop"), dst], check=True)
                    write("FuzzCapture", f"{name}-{fmt}", bytes([byte]) + open(dst, "rb").read())
    dbus_seeds()
    print(f"corpus: {n} codec vectors, {len(seen)} ATT PDUs", file=sys.stderr)


def dbus_first(sig):
    """Splits the first complete type off a D-Bus signature."""
    if sig[0] == "a":
        t, rest = dbus_first(sig[1:])
        return "a" + t, rest
    if sig[0] in "({":
        depth = 0
        for i, c in enumerate(sig):
            depth += c in "({"
            depth -= c in ")}"
            if depth == 0:
                return sig[:i + 1], sig[i + 1:]
    return sig[0], sig[1:]


def dbus_types(sig):
    out = []
    while sig:
        t, sig = dbus_first(sig)
        out.append(t)
    return out


ALIGN = {"y": 1, "g": 1, "v": 1, "q": 2, "n": 2, "b": 4, "u": 4, "i": 4, "s": 4, "o": 4, "a": 4, "x": 8, "t": 8, "d": 8, "(": 8, "{": 8}


def dbus_put(b, t, v):
    """Marshals value v of complete type t onto bytearray b (little-endian; offsets from b's start).
    Variants are (signature, value); structs and dict entries are tuples; arrays are lists."""
    b += b"\0" * (-len(b) % ALIGN[t[0]])
    c = t[0]
    if c == "y":
        b.append(v)
    elif c in "bu":
        b += struct.pack("<I", int(v))
    elif c == "q":
        b += struct.pack("<H", v)
    elif c == "n":
        b += struct.pack("<h", v)
    elif c in "so":
        b += struct.pack("<I", len(v.encode())) + v.encode() + b"\0"
    elif c == "g":
        b += bytes([len(v)]) + v.encode() + b"\0"
    elif c == "v":
        sig, inner = v
        b += bytes([len(sig)]) + sig.encode() + b"\0"
        dbus_put(b, sig, inner)
    elif c == "a":
        at = len(b)
        b += b"\0\0\0\0"
        b += b"\0" * (-len(b) % ALIGN[t[1]])
        start = len(b)
        for item in v:
            dbus_put(b, t[1:], item)
        b[at:at + 4] = struct.pack("<I", len(b) - start)
    else:  # ( or {
        for ft, fv in zip(dbus_types(t[1:-1]), v):
            dbus_put(b, ft, fv)


def dbus_message(kind, fields, sig, values, serial=1):
    """A little-endian D-Bus message; fields are (code, type, value) header fields."""
    if sig:
        fields = fields + [(8, "g", sig)]
    head = bytearray(b"l" + bytes([kind, 0, 1]) + struct.pack("<II", 0, serial))
    dbus_put(head, "a(yv)", [(code, (t, v)) for code, t, v in fields])
    head += b"\0" * (-len(head) % 8)
    body = bytearray()
    for t, v in zip(dbus_types(sig), values):
        dbus_put(body, t, v)
    head[4:8] = struct.pack("<I", len(body))
    return bytes(head + body)


def dbus_seeds():
    """Messages shaped as bluetoothd's: a Hello reply, a PropertiesChanged with a Value, a
    GetManagedObjects reply, a variant nested 60 deep, a Connect error (FuzzDBus)."""
    write("FuzzDBus", "hello-reply", dbus_message(2, [(5, "u", 1), (6, "s", ":1.7"), (7, "s", "org.freedesktop.DBus")], "s", [":1.7"]))
    char = "/org/bluez/hci1/dev_00_AA_01_00_00_07/service000a/char000b"
    value = list(bytes.fromhex("02780050005d00ea070b190a0000"))
    fields = [(1, "o", char), (2, "s", "org.freedesktop.DBus.Properties"), (3, "s", "PropertiesChanged"), (7, "s", ":1.2")]
    write("FuzzDBus", "properties-changed-value",
          dbus_message(4, fields, "sa{sv}as", ["org.bluez.GattCharacteristic1", [("Value", ("ay", value))], []], serial=9))
    deep = ("y", 42)
    for _ in range(59):
        deep = ("v", deep)
    write("FuzzDBus", "variant-60-deep", dbus_message(2, [(5, "u", 3)], "v", [deep]))
    write("FuzzDBus", "connect-error",
          dbus_message(3, [(4, "s", "org.bluez.Error.Failed"), (5, "u", 4)], "s", ["le-connection-abort-by-local"]))
    device = "/org/bluez/hci1/dev_00_AA_01_00_00_07"
    tree = [
        ("/org/bluez/hci1", [("org.bluez.Adapter1", [("Powered", ("b", True)), ("Discovering", ("b", False))])]),
        (device, [("org.bluez.Device1", [("Address", ("s", "00:AA:01:00:00:07")), ("RSSI", ("n", -50)),
                                         ("UUIDs", ("as", ["00001810-0000-1000-8000-00805f9b34fb"])),
                                         ("ManufacturerData", ("a{qv}", [(0x020E, ("ay", [1, 2, 3]))]))])]),
        (device + "/service000a/char000b", [("org.bluez.GattCharacteristic1", [("Flags", ("as", ["indicate"]))])]),
    ]
    write("FuzzDBus", "managed-objects", dbus_message(2, [(5, "u", 5)], "a{oa{sa{sv}}}", [tree]))

main()
