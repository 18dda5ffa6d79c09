#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Writes the replay benchmark's capture: a btsnoop (Linux monitor datalink) of at least MEGABYTES
MB made by repeating the sessions of the input captures one after the other, each copy with its
timestamps moved past the previous one and its own connection handle (cycling through
0x0001-0x0EFF). Streams the output; the inputs are read whole.

  make-capture.py [--notifications N] [--short] [--sessions N] OUT.btsnoop MEGABYTES IN.btsnoop...

--notifications N: keep each session's first N cuff-pressure notifications (counted per controller
  and direction: a two-controller log has each notification twice).
--short: every copy but the first (one per input) is a bonded reconnect: no discovery or reads
  (and no Number Of Completed Packets event right after one), so a session is about 20 records.
--sessions N: stop after that many copies, whatever the size.

The inputs must be btsnoop files of datalink 2001 (what `btmon -w` and `cuff measure --capture`
write), as the committed captures/ are."""
import struct
import sys

HEADER = struct.Struct(">IIIIQ")
# Monitor opcodes whose records the reader takes as sent (command, ACL, SCO, ISO out); the rest received.
SENT = {2, 4, 6, 18}
ACL = {4, 5}
DISCOVERY = {0x02, 0x03, 0x04, 0x05, 0x08, 0x09, 0x0A, 0x0B, 0x10, 0x11}


def read_records(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"btsnoop\0":
        sys.exit(f"make-capture: {path}: not a btsnoop file")
    version, datalink = struct.unpack(">II", data[8:16])
    if version != 1 or datalink != 2001:
        sys.exit(f"make-capture: {path}: expected btsnoop version 1, datalink 2001; found {version}, {datalink}")
    records = []  # (flags, timestamp µs, payload bytearray)
    at = 16
    while at + 24 <= len(data):
        _, included, flags, _, ts = HEADER.unpack_from(data, at)
        body = data[at + 24:at + 24 + included]
        if len(body) < included:
            break
        records.append((flags, ts, bytearray(body)))
        at += 24 + included
    return records


def direction_key(flags):
    return (flags >> 16, (flags & 0xFFFF) in SENT)


def is_notification(p):
    return len(p) >= 9 and p[6] == 0x04 and p[7] == 0x00 and p[8] == 0x1B


def is_discovery(p):
    if len(p) < 9 or p[6] != 0x04 or p[7] != 0x00:
        return False
    return p[8] in DISCOVERY or (p[8] == 0x01 and len(p) >= 10 and p[9] in DISCOVERY)


def reconnect(records):
    """The records a bonded central with a GATT cache would see: no discovery or reads."""
    out = []
    dropped = False
    dropping = {}  # per controller and direction: the frame being continued was dropped
    for r in records:
        flags, _, p = r
        if (flags & 0xFFFF) in ACL and len(p) >= 2:
            key = direction_key(flags)
            if (p[1] >> 4) & 3 != 1:
                dropping[key] = is_discovery(p)
            if dropping.get(key):
                dropped = True
                continue
        keep = not ((flags & 0xFFFF) == 3 and p[:1] == b"\x13" and dropped)
        dropped = False
        if keep:
            out.append(r)
    return out


def set_handle(flags, p, h):
    def put(i):
        if len(p) >= i + 2:
            p[i] = h & 0xFF
            p[i + 1] = (p[i + 1] & 0xF0) | (h >> 8)

    op = flags & 0xFFFF
    if op in ACL:
        put(0)
    elif op == 3 and len(p) >= 2:
        if p[0] == 0x3E and len(p) > 2 and p[2] in (0x01, 0x0A, 0x29):
            put(4)
        elif p[0] in (0x05, 0x13):
            put(3)


def main(argv):
    keep = None
    short = False
    limit = None
    rest = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--notifications" and i + 1 < len(argv):
            keep = int(argv[i + 1])
            i += 2
        elif a == "--sessions" and i + 1 < len(argv):
            limit = int(argv[i + 1])
            i += 2
        elif a == "--short":
            short = True
            i += 1
        else:
            rest.append(a)
            i += 1
    if len(rest) < 3:
        sys.exit(__doc__)
    out, megabytes, inputs = rest[0], int(rest[1] or 200), rest[2:]
    sessions, reconnects = [], []
    for path in inputs:
        records = read_records(path)
        if keep is not None:
            seen = {}
            kept = []
            for r in records:
                if is_notification(r[2]):
                    key = direction_key(r[0])
                    seen[key] = seen.get(key, 0) + 1
                    if seen[key] > keep:
                        continue
                kept.append(r)
            records = kept
        sessions.append(records)
        if short:
            reconnects.append(reconnect(records))
    target = megabytes * 1_000_000
    written = 16
    copy = 0
    clock = sessions[0][0][1] if sessions and sessions[0] else 0
    with open(out, "wb") as f:
        f.write(b"btsnoop\0" + struct.pack(">II", 1, 2001))
        chunk = []
        while written < target and (limit is None or copy < limit):
            s = reconnects[copy % len(sessions)] if short and copy >= len(sessions) else sessions[copy % len(sessions)]
            if not s:
                break
            shift = clock - s[0][1]
            handle = 1 + copy % 0x0EFF
            for flags, ts, p in s:
                q = bytearray(p)
                set_handle(flags, q, handle)
                chunk.append(HEADER.pack(len(q), len(q), flags, 0, max(0, ts + shift)))
                chunk.append(q)
                written += 24 + len(q)
            if len(chunk) > 65536:
                f.write(b"".join(chunk))
                chunk = []
            clock += (s[-1][1] - s[0][1]) + 1_000_000  # µs: the next copy a second after this one ends
            copy += 1
        f.write(b"".join(chunk))
    print(f"make-capture: {out}: {written} bytes, {copy} sessions")


if __name__ == "__main__":
    main(sys.argv[1:])
