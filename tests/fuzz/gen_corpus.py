#!/usr/bin/env python3
"""Regenerate tests/fuzz/corpus/: the fuzz targets' seeds.

    python3 tests/fuzz/gen_corpus.py --build build-fuzz [--out tests/fuzz/corpus]

Seeds are small real files:
  wal/          real SQLite WAL files (Python's sqlite3, 512- and 1024-byte
                pages, copied while the writer still holds them open), and
                variants: torn tail, stale frame, big-endian checksums,
                header only, empty
  artifact/     sealed checkpoint artifacts of the snapshot parts' pages
                (4 KiB chunks; fuzz_gen_corpus)
  batch/ snap/ manifest/ watermark/ close/ ckpt_json/
                the objects a real `walship replicate --once` and
                `walship checkpoint` wrote to a file:// sink (real-*), and
                the library's own encoders' variants (gen-*, fuzz_gen_corpus)
  config/ sink_url/ s3_xml/ http_headers/
                hand-written: docs/CLI.md's examples and edge cases
Files that exist and are not regenerated (hand-made ones, crash
reproducers named regress-*) are left alone.
"""
import argparse
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile

MAGIC_LE, MAGIC_BE = 0x377F0682, 0x377F0683


def wal_checksum(be, data, s1=0, s2=0):
    fmt = ">%dI" if be else "<%dI"
    words = struct.unpack(fmt % (len(data) // 4), data)
    for i in range(0, len(words), 2):
        s1 = (s1 + words[i] + s2) & 0xFFFFFFFF
        s2 = (s2 + words[i + 1] + s1) & 0xFFFFFFFF
    return s1, s2


def rechecksum(wal, be):
    """The same WAL with the magic set for byte order `be` and every checksum redone."""
    wal = bytearray(wal)
    struct.pack_into(">I", wal, 0, MAGIC_BE if be else MAGIC_LE)
    s = wal_checksum(be, bytes(wal[:24]))
    struct.pack_into(">II", wal, 24, *s)
    ps = struct.unpack_from(">I", wal, 8)[0]
    off = 32
    while off + 24 + ps <= len(wal):
        s = wal_checksum(be, bytes(wal[off:off + 8]), *s)
        s = wal_checksum(be, bytes(wal[off + 24:off + 24 + ps]), *s)
        struct.pack_into(">II", wal, off + 16, *s)
        off += 24 + ps
    return bytes(wal)


def make_wal(dirname, page_size, commits, rows):
    """A WAL of `commits` transactions, read while the connection keeps it."""
    db = os.path.join(dirname, "w%d.db" % page_size)
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA page_size=%d" % page_size)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
    for c in range(commits):
        con.execute("BEGIN")
        for r in range(rows):
            con.execute("INSERT INTO t(v) VALUES (?)", ("row %d.%d" % (c, r),))
        con.execute("COMMIT")
    with open(db + "-wal", "rb") as f:
        wal = f.read()
    con.close()
    return wal


def put(out, target, name, data, force=True):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, name)
    if not force and os.path.exists(p):
        return
    with open(p, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def harvest(out, walship, tmp):
    """Objects a real replicate and checkpoint wrote: sorted by their magic."""
    db = os.path.join(tmp, "app.db")
    sink = os.path.join(tmp, "sink")
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA page_size=512")
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
    env = dict(os.environ, WS_LOG_LEVEL="error")
    for i in range(3):
        con.execute("INSERT INTO t(v) VALUES ('first %d')" % i)
        subprocess.run([walship, "replicate", "--once", "--quiet", "--sink", "file://" + sink,
                        "app=" + db], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run([walship, "checkpoint", "--sink", "file://" + sink], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    con.close()
    kinds = {b"WSBATCH1": "batch", b"WSSNAPP1": "snap", b"WSMANIF1": "manifest", b"WSWMARK1": "watermark",
             b"WSCLOSE1": "close"}
    n = 0
    for root, _, files in os.walk(sink):
        for fn in sorted(files):
            with open(os.path.join(root, fn), "rb") as f:
                data = f.read()
            kind = kinds.get(data[:8]) or ("ckpt_json" if data[:1] == b"{" else None)
            if kind is None or len(data) > 8192:
                continue
            put(out, kind, "real-" + fn, data)
            n += 1
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build-fuzz")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus"))
    a = ap.parse_args()
    gen = os.path.join(a.build, "tests/fuzz/fuzz_gen_corpus")
    walship = os.path.join(a.build, "tools/walship")
    with tempfile.TemporaryDirectory() as tmp:
        w512 = make_wal(tmp, 512, 3, 4)
        os.makedirs(os.path.join(tmp, "b"))
        w1024 = make_wal(os.path.join(tmp, "b"), 1024, 2, 2)
        put(a.out, "wal", "real-512-3commits", w512)
        put(a.out, "wal", "real-1024-2commits", w1024)
        put(a.out, "wal", "torn-tail", w512[:-100])
        fsz = 24 + 512
        stale = bytearray(w512)
        struct.pack_into(">I", stale, 32 + fsz + 8, struct.unpack_from(">I", stale, 16)[0] - 1)
        put(a.out, "wal", "stale-salt-frame2", bytes(stale))
        put(a.out, "wal", "big-endian", rechecksum(w512, True))
        put(a.out, "wal", "header-only", w512[:32])
        put(a.out, "wal", "empty", b"")
        walfile = os.path.join(tmp, "seed.wal")
        with open(walfile, "wb") as f:
            f.write(w512)
        subprocess.run([gen, a.out, walfile], check=True)
        if os.access(walship, os.X_OK):
            print("harvested %d objects from a real sink" % harvest(a.out, walship, tmp))
        else:
            sys.exit("no %s: build with -DWS_FUZZ=ON first" % walship)
    return 0


if __name__ == "__main__":
    sys.exit(main())
