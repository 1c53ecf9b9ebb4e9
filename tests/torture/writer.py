#!/usr/bin/env python3
"""One source database's writer, and the oracle's record of its history.

    writer.py --db PATH --log STATES.jsonl --seed N --stop FILE [--profile P] [--request FILE]

A real SQLite application (Python's sqlite3, i.e. Debian's libsqlite3) that
writes until FILE exists, and appends one JSON line to STATES.jsonl after
every commit (flushed before the next transaction starts):

    {"life": L, "seq": S, "digest": HEX, "salt": [s1, s2] | null,
     "cks": C | null, "frame": F | null, "t": UNIX_TIME}

(life, seq) is also stored in the database itself (table meta, updated by
every transaction), so a restored database names the one state it claims to
be; `digest` (see digest.py) says what that state's content was. `salt`,
`cks` and `frame` are the WAL generation and the commit's frame number
(mxFrame of the WAL index right after the commit), so an acknowledged
last_frame maps to exactly one state.

A life is one database file at the path. `replace` builds a new file next to
it (a copy of the current content, or a fresh one), closes every connection,
removes -wal and -shm and renames the new file into place: the path's next
life, which must never be restored as a continuation of the previous one.

Actions (random, from the seed): transactions of 1-15 rows and of
1,500-3,000 rows of 3 KB blobs with cache_size 64, so pages spill and the
meta page, written at the start and again at the end, is rewritten after
it spilled; PASSIVE/FULL/RESTART/TRUNCATE checkpoints; reconnects (with
autocheckpoint on, the last close checkpoints and deletes the WAL when no
one else holds it); an index created or dropped; the database replaced.
"""
import argparse
import json
import os
import random
import sqlite3
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import digest as dg  # noqa: E402

BLOB = 3072
PROFILES = {
    # restart-busy is issue 10's workload: small and spilling transactions,
    # checkpoints of every mode and reconnects every few dozen transactions.
    "mixed": dict(keys=4000, p_big=0.06, p_ckpt=0.05, p_reconnect=0.02, p_replace=0.004,
                  p_schema=0.01, p_lastclose=0.01, conns=(1, 2), pause_ms=(0, 30)),
    "restart-busy": dict(keys=4000, p_big=0.05, p_ckpt=0.04, p_reconnect=0.03, p_replace=0.0,
                         p_schema=0.0, p_lastclose=0.0, conns=(1, 1), pause_ms=(0, 20)),
}


class Writer:
    def __init__(self, a):
        self.path = a.db
        self.rng = random.Random(a.seed)
        self.prof = PROFILES[a.profile]
        self.log = open(a.log, "a", buffering=1)
        self.stop = a.stop
        self.request = a.request
        self.max_txn = a.max_txn
        self.conns = []
        self.rows = {}  # k -> (n, hash of v, row hash)
        self.rowsum = 0
        self.life = 0
        self.seq = 0
        self.txns = 0
        self.stats = dict(small=0, big=0, busy=0, ckpt=0, ckpt_busy=0, reconnect=0, replace=0, schema=0,
                          lastclose=0, requests=0)

    # -- connections -------------------------------------------------------
    def connect(self):
        c = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        c.execute("PRAGMA busy_timeout=30000")
        c.execute("PRAGMA cache_size=64")
        c.execute("PRAGMA journal_mode=WAL")
        return c

    def open_all(self):
        n = self.rng.randint(*self.prof["conns"])
        self.conns = [self.connect() for _ in range(n)]
        self.open_fds()

    def open_fds(self):
        # Opened once per set of connections and closed only after them:
        # closing any descriptor of a file drops every POSIX lock this
        # process holds on it, SQLite's shm locks included (then the next
        # connection elsewhere believes it is the first, truncates -shm,
        # and this process dies of SIGBUS on its mapping).
        fds = getattr(self, "fds", None) or [-1, -1]
        for i, suffix in enumerate(("-wal", "-shm")):
            if fds[i] < 0:
                try:
                    fds[i] = os.open(self.path + suffix, os.O_RDONLY)
                except FileNotFoundError:
                    pass
        self.fds = fds

    def close_all(self):
        for c in self.conns:
            c.close()
        self.conns = []
        for fd in getattr(self, "fds", []):
            if fd >= 0:
                os.close(fd)
        self.fds = []

    # -- the oracle --------------------------------------------------------
    def wal_position(self):
        """(salt, cks, frame) of the commit just made, or Nones."""
        if min(self.fds) < 0:
            self.open_fds()  # created since (a fresh database)
            if min(self.fds) < 0:
                return None, None, None
        h = os.pread(self.fds[0], 32, 0)
        idx = os.pread(self.fds[1], 96, 0)
        if len(h) < 32 or len(idx) < 96 or idx[0:48] != idx[48:96]:
            return None, None, None
        _magic, _ver, _ps, cks, s1, s2 = struct.unpack(">IIIIII", h[:24])
        mx = struct.unpack("<I", idx[16:20])[0]
        # The index's salts are the header's bytes as stored.
        if idx[32:40] != h[16:24]:
            return None, None, None
        return [s1, s2], cks, mx

    def record(self, c, with_frame=True):
        schema = dg.schema_of(c)
        d = dg.digest(self.life, self.seq, self.rowsum, schema)
        salt, cks, frame = self.wal_position() if with_frame else (None, None, None)
        self.log.write(json.dumps(dict(life=self.life, seq=self.seq, digest=d, salt=salt, cks=cks,
                                       frame=frame, t=time.time())) + "\n")
        self.log.flush()

    def check_model(self, c):
        """The model equals the database (else the oracle itself is wrong)."""
        life, seq, rowsum, _ = dg.scan(c)
        if (life, seq, rowsum) != (self.life, self.seq, self.rowsum):
            raise SystemExit("writer %s: oracle model differs from the database: db (%d,%d,%x) model (%d,%d,%x)"
                             % (self.path, life, seq, rowsum, self.life, self.seq, self.rowsum))

    # -- database ----------------------------------------------------------
    def create(self):
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(self.path + suffix)
            except FileNotFoundError:
                pass
        c = self.connect()
        c.execute("CREATE TABLE IF NOT EXISTS meta(id INTEGER PRIMARY KEY, life INTEGER, seq INTEGER)")
        c.execute("CREATE TABLE IF NOT EXISTS t(k INTEGER PRIMARY KEY, n INTEGER, v BLOB)")
        c.execute("INSERT INTO meta VALUES(1, 0, 0)")
        self.conns = [c]
        self.open_fds()
        self.record(c)

    def put(self, c, k, n, v):
        c.execute("INSERT OR REPLACE INTO t VALUES(?,?,?)", (k, n, v))

    def apply_put(self, ops, k, n, v):
        ops.append(("put", k, n, dg.blob_hash(v)))

    def txn(self, big):
        c = self.rng.choice(self.conns)
        keys = self.prof["keys"]
        ops = []
        seq = self.seq + 1
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            self.stats["busy"] += 1
            return
        try:
            c.execute("UPDATE meta SET seq=? WHERE id=1", (seq,))
            if big:
                count = self.rng.randint(1500, 3000)
                start = self.rng.randrange(keys)
                for i in range(count):
                    k = (start + i) % keys
                    n = self.rng.randrange(1 << 30)
                    v = self.rng.randbytes(BLOB)
                    self.put(c, k, n, v)
                    self.apply_put(ops, k, n, v)
                # Drop a range so the table stays bounded.
                a = self.rng.randrange(keys)
                b = a + self.rng.randint(0, 1200)
                c.execute("DELETE FROM t WHERE k BETWEEN ? AND ?", (a, b))
                ops.append(("del", a, b))
            else:
                for _ in range(self.rng.randint(1, 15)):
                    r = self.rng.random()
                    k = self.rng.randrange(keys)
                    if r < 0.6:
                        n = self.rng.randrange(1 << 30)
                        v = self.rng.randbytes(self.rng.choice((8, 100, BLOB)))
                        self.put(c, k, n, v)
                        self.apply_put(ops, k, n, v)
                    elif r < 0.8:
                        c.execute("DELETE FROM t WHERE k=?", (k,))
                        ops.append(("del", k, k))
                    else:
                        c.execute("UPDATE t SET n=n+1 WHERE k=?", (k,))
                        ops.append(("inc", k))
            # Written again at the end: after a spill, a page rewritten in
            # the same transaction (SQLite re-checksums its frames).
            c.execute("UPDATE meta SET seq=? WHERE id=1", (seq,))
            c.execute("COMMIT")
        except BaseException:
            try:
                c.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise
        for op in ops:
            self.model(op)
        self.seq = seq
        self.stats["big" if big else "small"] += 1
        self.record(c)

    def model(self, op):
        if op[0] == "put":
            _, k, n, vh = op
            self.set_row(k, n, vh)
        elif op[0] == "del":
            _, a, b = op
            for k in [k for k in self.rows if a <= k <= b]:
                self.rowsum -= self.rows.pop(k)[2]
        else:
            k = op[1]
            if k in self.rows:
                n, vh, _ = self.rows[k]
                self.set_row(k, n + 1, vh)
        self.rowsum %= dg.MOD

    def set_row(self, k, n, vh):
        old = self.rows.get(k)
        if old:
            self.rowsum -= old[2]
        h = dg.row_hash(k, n, vh)
        self.rows[k] = (n, vh, h)
        self.rowsum += h

    def checkpoint(self):
        mode = self.rng.choice(("PASSIVE", "FULL", "RESTART", "TRUNCATE"))
        c = self.rng.choice(self.conns)
        c.execute("PRAGMA busy_timeout=%d" % self.rng.choice((0, 50, 200)))
        try:
            busy, _, _ = c.execute("PRAGMA wal_checkpoint(%s)" % mode).fetchone()
        except sqlite3.OperationalError:
            busy = 1
        c.execute("PRAGMA busy_timeout=30000")
        self.stats["ckpt"] += 1
        self.stats["ckpt_busy"] += busy

    def schema_change(self):
        c = self.rng.choice(self.conns)
        has = c.execute("SELECT count(*) FROM sqlite_master WHERE name='t_n'").fetchone()[0]
        seq = self.seq + 1
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            self.stats["busy"] += 1
            return
        c.execute("UPDATE meta SET seq=? WHERE id=1", (seq,))
        c.execute("DROP INDEX t_n" if has else "CREATE INDEX t_n ON t(n)")
        c.execute("COMMIT")
        self.seq = seq
        self.stats["schema"] += 1
        self.record(c)

    def replace(self):
        """The path's next life: a new file renamed over the old one."""
        nxt = self.path + ".next"
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                os.unlink(nxt + suffix)
            except FileNotFoundError:
                pass
        src = self.conns[0]
        dst = sqlite3.connect(nxt, isolation_level=None)
        keep = self.rng.random() < 0.7
        if keep:
            # A copy of what is there now (a restore put into place): the
            # old and the new life share most pages.
            src.backup(dst)
        else:
            dst.execute("CREATE TABLE meta(id INTEGER PRIMARY KEY, life INTEGER, seq INTEGER)")
            dst.execute("CREATE TABLE t(k INTEGER PRIMARY KEY, n INTEGER, v BLOB)")
            dst.execute("INSERT INTO meta VALUES(1, 0, 0)")
        dst.execute("PRAGMA journal_mode=WAL")
        self.life += 1
        self.seq = 0
        dst.execute("UPDATE meta SET life=?, seq=0 WHERE id=1", (self.life,))
        if not keep:
            self.rows = {}
            self.rowsum = 0
        dst.close()
        self.close_all()
        for suffix in ("-wal", "-shm"):
            try:
                os.unlink(self.path + suffix)
            except FileNotFoundError:
                pass
        os.rename(nxt, self.path)
        self.open_all()
        self.check_model(self.conns[0])
        self.record(self.conns[0], with_frame=False)
        self.stats["replace"] += 1

    def serve_request(self):
        """The harness asks (a file naming the action) for what makes the
        next walship re-base, while walship is down: every connection
        closed (the last close checkpoints and deletes the WAL), a WAL
        restart (TRUNCATE checkpoint), or the file replaced; then one
        transaction. The file goes once it is done."""
        try:
            what = open(self.request).read().strip()
        except FileNotFoundError:
            return
        if what == "lastclose":
            self.close_all()
            self.open_all()
            self.stats["lastclose"] += 1
        elif what == "truncate":
            c = self.conns[0]
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.stats["ckpt"] += 1
        elif what == "replace":
            self.replace()
        else:
            raise SystemExit("writer %s: unknown request %r" % (self.path, what))
        self.txn(False)
        self.txns += 1
        self.stats["requests"] += 1
        os.unlink(self.request)

    def run(self):
        self.create()
        self.close_all()
        self.open_all()
        p = self.prof
        while not os.path.exists(self.stop) and (self.max_txn == 0 or self.txns < self.max_txn):
            if self.request and os.path.exists(self.request):
                self.serve_request()
                continue
            r = self.rng.random()
            if r < p["p_ckpt"]:
                self.checkpoint()
            elif r < p["p_ckpt"] + p["p_reconnect"]:
                self.close_all()
                self.open_all()
                self.stats["reconnect"] += 1
            elif r < p["p_ckpt"] + p["p_reconnect"] + p["p_replace"]:
                self.replace()
            elif r < p["p_ckpt"] + p["p_reconnect"] + p["p_replace"] + p["p_schema"]:
                self.schema_change()
            elif r < p["p_ckpt"] + p["p_reconnect"] + p["p_replace"] + p["p_schema"] + p["p_lastclose"]:
                # Every connection closed (the WAL goes with the last close
                # when no one else holds it), then a pause before reopening.
                self.close_all()
                time.sleep(self.rng.uniform(0, 0.3))
                self.open_all()
                self.stats["lastclose"] += 1
            else:
                self.txn(self.rng.random() < p["p_big"])
                self.txns += 1
            lo, hi = p["pause_ms"]
            if hi:
                time.sleep(self.rng.uniform(lo, hi) / 1000.0)
        self.check_model(self.conns[0])
        self.close_all()
        sys.stdout.write(json.dumps(dict(path=self.path, life=self.life, seq=self.seq, **self.stats)) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--stop", required=True)
    ap.add_argument("--profile", default="mixed", choices=sorted(PROFILES))
    ap.add_argument("--max-txn", type=int, default=0)
    ap.add_argument("--request", default=None, metavar="FILE",
                    help="a file the harness writes to ask for a re-base's cause (lastclose, truncate, replace)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a profile's probability (p_big, p_ckpt, p_reconnect, p_replace, ...)")
    a = ap.parse_args()
    for kv in a.set:
        k, v = kv.split("=", 1)
        if k not in PROFILES[a.profile] or not k.startswith("p_"):
            ap.error("--set: unknown key %s" % k)
        PROFILES[a.profile][k] = float(v)
    Writer(a).run()


if __name__ == "__main__":
    main()
