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
    print(f"corpus: {n} codec vectors, {len(seen)} ATT PDUs", file=sys.stderr)


main()
