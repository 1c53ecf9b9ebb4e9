"""The oracle's digest of a database state, shared by the writer (which keeps
it incrementally) and the checker (which scans a restored database).

A state is named by (life, seq), stored in the database's meta table, and
its content is summed up by `digest`: SHA-256 over life, seq, the schema
(sqlite_master) and the sum modulo 2^256 of one SHA-256 per row of t
(a multiset hash, so the writer can update it per row instead of rescanning
megabytes after every commit).
"""
import hashlib
import json
import struct

MOD = 1 << 256


def blob_hash(v):
    return hashlib.sha256(v if isinstance(v, (bytes, bytearray)) else str(v).encode()).digest()


def row_hash(k, n, vh):
    return int.from_bytes(hashlib.sha256(struct.pack("<qq", k, n) + vh).digest(), "big")


def schema_of(c):
    return [list(r) for r in c.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name")]


def digest(life, seq, rowsum, schema):
    return hashlib.sha256(json.dumps([life, seq, "%064x" % rowsum, schema]).encode()).hexdigest()


def scan(c):
    """(life, seq, rowsum, schema) of the database on connection c."""
    life, seq = c.execute("SELECT life, seq FROM meta WHERE id=1").fetchone()
    s = 0
    for k, n, v in c.execute("SELECT k, n, v FROM t"):
        s += row_hash(k, n, blob_hash(v))
    return life, seq, s % MOD, schema_of(c)
