#!/usr/bin/env python3
"""Writes a damaged copy of a gearbox checkpoint, correctly checksummed, so that what the
reader refuses is the damage and not the checksum (gearbox/engine/checkpoint.h has the layout).

  craft_checkpoint.py IN OUT drop TAG   without section TAG (e.g. STEP)
  craft_checkpoint.py IN OUT dup TAG    with section TAG twice
  craft_checkpoint.py IN OUT step N     with the step set to N
  craft_checkpoint.py IN OUT nan I      with parameter I set to NaN
  craft_checkpoint.py IN OUT conf A|B   with its saved config's text A replaced by B
"""
import struct
import sys


def fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def sections(data):
    magic, (version, count), pos, out = data[:8], struct.unpack("<II", data[8:16]), 16, []
    for _ in range(count):
        tag, (n,) = data[pos:pos + 4], struct.unpack("<Q", data[pos + 4:pos + 12])
        out.append([tag, data[pos + 12:pos + 12 + n]])
        pos += 12 + n
    return magic, version, out


def main(src, dst, op, arg):
    magic, version, secs = sections(open(src, "rb").read()[:-8])
    tag = arg.encode()
    if op == "drop":
        secs = [s for s in secs if s[0] != tag]
    elif op == "dup":
        secs += [s for s in secs if s[0] == tag]
    elif op == "step":
        secs = [[t, struct.pack("<q", int(arg)) if t == b"STEP" else b] for t, b in secs]
    elif op == "nan":
        i = 4 * int(arg)
        secs = [[t, b[:i] + struct.pack("<f", float("nan")) + b[i + 4:] if t == b"PRMS" else b]
                for t, b in secs]
    elif op == "conf":
        old, new = (part.encode() for part in arg.split("|"))
        secs = [[t, b.replace(old, new) if t == b"CONF" else b] for t, b in secs]
    else:
        sys.exit("unknown operation " + op)
    body = magic + struct.pack("<II", version, len(secs))
    body += b"".join(t + struct.pack("<Q", len(b)) + b for t, b in secs)
    open(dst, "wb").write(body + struct.pack("<Q", fnv1a(body)))


if __name__ == "__main__":
    main(*sys.argv[1:5])
