#!/usr/bin/env python3
"""forge_wal.py WAL PAGES: set the database size of WAL's last commit frame
to PAGES and recompute the checksum chain from that frame on, so that the
frame stays valid to SQLite and to walship: a hash-consistent forgery of the
kind no decoder can catch by its checksums alone (issue 12 finding 7).
forge_wal.py WAL cells: instead, in the last frame before that commit that
holds a b-tree page other than page 1, raise the page's cell count, so
that the restored image fails PRAGMA integrity_check.

Prints the forged frame's number (1-based)."""
import struct
import sys

path, what = sys.argv[1], sys.argv[2]
data = bytearray(open(path, "rb").read())
magic, _version, page_size, _ckpt_seq, salt1, salt2 = struct.unpack(">6I", data[:24])
if magic not in (0x377F0682, 0x377F0683):
    sys.exit("not a WAL: magic %#x" % magic)
order = ">" if magic & 1 else "<"


def cksum(buf, s0, s1):
    words = struct.unpack(order + "%dI" % (len(buf) // 4), buf)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


frame_size = 24 + page_size
s = cksum(bytes(data[:24]), 0, 0)
frames, commits = [], []
off = 32
while off + frame_size <= len(data):
    hdr = data[off:off + 24]
    pgno, dbsz, fs1, fs2, c1, c2 = struct.unpack(">6I", hdr)
    if (fs1, fs2) != (salt1, salt2):
        break
    s = cksum(bytes(hdr[:8]) + bytes(data[off + 24:off + frame_size]), *s)
    if s != (c1, c2):
        break
    frames.append(off)
    if dbsz:
        commits.append(len(frames) - 1)
    off += frame_size
if not commits:
    sys.exit("no commit frame in " + path)
last = commits[-1]
forged = last
if what == "cells":
    for i in range(last, -1, -1):
        pgno = struct.unpack(">I", data[frames[i]:frames[i] + 4])[0]
        page = frames[i] + 24
        if pgno != 1 and data[page] in (0x0D, 0x0A):  # a leaf page
            cells = struct.unpack(">H", data[page + 3:page + 5])[0]
            struct.pack_into(">H", data, page + 3, cells + 7)
            forged = i
            break
    else:
        sys.exit("no leaf page in the last transaction of " + path)
else:
    struct.pack_into(">I", data, frames[last] + 4, int(what, 0))
# Recompute the chain from the WAL header through every valid frame.
s = cksum(bytes(data[:24]), 0, 0)
for off in frames[: last + 1]:
    s = cksum(bytes(data[off:off + 8]) + bytes(data[off + 24:off + frame_size]), *s)
    struct.pack_into(">2I", data, off + 16, *s)
open(path, "r+b").write(data)
print(forged + 1)
