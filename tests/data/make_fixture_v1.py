#!/usr/bin/env python3
"""Remake tests/data/format_v1: a file:// sink written by walship's object
format version 1 (docs/FORMAT.md as of batch/snapshot/manifest version 1-3,
watermark version 2-3, checkpoint objects *.v1), and the digests of what the
source held at each point a reader must restore.

    python3 tests/data/make_fixture_v1.py WALSHIP [OUTDIR]

WALSHIP is the walship binary of the format being frozen; OUTDIR defaults
to tests/data/format_v1 (replaced). Real SQLite writers (this process, one
connection per database, as an application holds it) and the real CLI:

tenant a (page size 1024, WAL):
  chain 0  REBASE (first chain: snapshot parts + frames), CONTINUE with stored
           batches (manifest v1, inline_batch_bytes_max = off), checkpoint 1,
           another v1, then a CONTINUE with its batch inline (manifest v2)
  chain 1  the last connection closed while walship was not running (WAL
           deleted): a REBASE linked to chain 0's head; then one long-running
           replicate with carry_in_watermark = always and a small
           wal_checkpoint_bytes: NEXT_GENs (the WAL restarted under it),
           carried manifests merged over several tails (manifest v3, stored
           once they outgrow their bound), checkpoint 2 (stores the carried
           head), retention --keep-checkpoints 2 (removes chain 0 behind
           checkpoint 1's cut), then a last replicate that ends with the
           watermark carrying its manifest (watermark v3)
tenant b (page size 512, its last connection closed before each ship: no
          WAL, generation g-none):
  two REBASEs, the second linked to the first; watermark v2

expected.txt, one point a line (the digest is fixture_digest.py's):
  frame TENANT GEN:N SHA256     restore --frame GEN:N
  liveframe TENANT N SHA256     restore --frame N (the watermark's generation)
  time TENANT RFC3339 SHA256    restore --time T
  head TENANT - SHA256          restore (latest)
  checkpoint TENANT ID SHA256   restore --checkpoint ID
  removed TENANT GEN:N|RFC3339 - retention removed it: restore refuses it
Every point is restored by this script before it writes anything, so the
record is what today's walship restores as well as what the source held.
"""
import json
import os
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_digest import digest  # noqa: E402


def wal_position(db):
    """(generation key, last commit frame) of a database in WAL mode, read
    right after the caller's own commit: the generation from the WAL
    header (checkpoint sequence, salts), the frame from the wal-index
    header in the -shm file (mxFrame, SQLite's last committed frame, in
    native byte order; its copy of the salts must match the WAL's)."""
    with open(db + "-wal", "rb") as f:
        _magic, _ver, _psz, ckseq, s1, s2 = struct.unpack(">6I", f.read(24))
    with open(db + "-shm", "rb") as f:
        hdr = f.read(48)
    mx_frame = struct.unpack("=I", hdr[16:20])[0]
    salts = hdr[32:40]
    wal_salts = struct.pack(">2I", s1, s2)
    assert salts == wal_salts, "wal-index and WAL header disagree"
    return "g%08x-%08x%08x" % (ckseq, s1, s2), mx_frame


def rfc3339(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)


class Fixture:
    def __init__(self, walship, work):
        self.ws = walship
        self.work = work
        self.sink = os.path.join(work, "sink")
        self.url = "file://" + self.sink
        self.points = []  # (kind, tenant, where, digest or "-")
        self.conns = {}
        self.last = {}  # tenant: the last state given a frame point
        self.rows = 0

    # --- the writers -------------------------------------------------
    def path(self, tenant):
        return os.path.join(self.work, tenant + ".db")

    def open(self, tenant, page_size, journal):
        c = sqlite3.connect(self.path(tenant), isolation_level=None)
        c.execute("PRAGMA busy_timeout=5000")
        c.execute(f"PRAGMA page_size={page_size}")
        c.execute(f"PRAGMA journal_mode={journal}")
        self.conns[tenant] = c
        return c

    def commit(self, tenant, n=3, update=False, delete=False):
        """One transaction of the application; returns (gen, frame, digest)
        of the state it committed, read by the writer right after."""
        c = self.conns[tenant]
        c.execute("BEGIN IMMEDIATE")
        c.execute("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, k TEXT, v TEXT, b BLOB)")
        c.execute("CREATE INDEX IF NOT EXISTS t_k ON t(k)")
        for _ in range(n):
            self.rows += 1
            r = self.rows
            c.execute("INSERT INTO t(k, v, b) VALUES (?, ?, ?)",
                      (f"key-{r * 7919 % 1000:04d}", f"row {r} " + "lorem ipsum " * (r % 9 + 3),
                       bytes((r * i) & 0xFF for i in range(r % 40 + 8))))
        if update:
            c.execute("UPDATE t SET v = v || ' (updated)' WHERE id % 5 = 1")
        if delete:
            c.execute("DELETE FROM t WHERE id % 7 = 3")
        c.execute("COMMIT")
        c.execute("BEGIN")
        d = digest(c)
        c.execute("COMMIT")
        db = self.path(tenant)
        gen, frame = wal_position(db) if os.path.exists(db + "-wal") else ("g-none", 0)
        return gen, frame, d

    # --- walship ----------------------------------------------------------
    def run(self, *args, check=True):
        p = subprocess.run([self.ws, *args], capture_output=True, text=True)
        if check and p.returncode != 0:
            sys.exit(f"walship {' '.join(args)}: exit {p.returncode}\n{p.stdout}{p.stderr}")
        return p

    def config(self, name, **shard):
        path = os.path.join(self.work, name + ".ini")
        with open(path, "w") as f:
            f.write(f"[engine]\nsink = {self.url}\n")
            if "wal_checkpoint_bytes" in shard:
                f.write(f"wal_checkpoint_bytes = {shard.pop('wal_checkpoint_bytes')}\n")
            f.write("[shard.0]\n")
            for k, v in shard.items():
                f.write(f"{k} = {v}\n")
        return path

    def ship(self, tenant, cfg):
        self.run("replicate", "--config", cfg, "--once", "--quiet", f"{tenant}={self.path(tenant)}")

    def head(self, tenant):
        p = self.run("ls", "--sink", self.url, tenant, "--json")
        g = json.loads(p.stdout.splitlines()[0])
        return g["generation"], g["last_frame"]

    def wait_shipped(self, tenant, gen, frame):
        for _ in range(1500):
            if self.head(tenant) == (gen, frame):
                return
            time.sleep(0.02)
        sys.exit(f"tenant {tenant}: {gen}:{frame} not shipped in 30 s (head {self.head(tenant)})")

    def now_point(self, tenant, d):
        """A --time point: everything before it shipped, nothing after it
        committed yet."""
        time.sleep(0.03)
        ms = int(time.time() * 1000)
        time.sleep(0.03)
        self.points.append(("time", tenant, rfc3339(ms), d))

    def state(self, tenant, pos, kind_time=True, live=None):
        gen, frame, d = pos
        prev = self.last.get(tenant)
        if frame and prev and prev[0] == gen and frame - prev[1] >= 3:
            # a frame inside the next transaction: the state before it
            self.points.append(("frame", tenant, f"{gen}:{prev[1] + 1}", prev[2]))
        if frame:
            self.points.append(("frame", tenant, f"{gen}:{frame}", d))
            self.last[tenant] = pos
        if frame and gen == live:
            self.points.append(("liveframe", tenant, str(frame), d))
        if kind_time:
            self.now_point(tenant, d)

    def checkpoint(self):
        out = json.loads(self.run("checkpoint", "--sink", self.url).stdout)
        return out["id"]


def build(f):
    cfg_stored = f.config("stored", inline_batch_bytes_max="off", carry_in_watermark="never")
    cfg_default = f.config("default")
    cfg_carry = f.config("carry", carry_in_watermark="always", batch_age_ms_max=5,
                         key_write_interval_ms=0, inline_batch_bytes_max=4096,
                         wal_checkpoint_bytes="12KiB")

    # tenant a, chain 0
    a = f.open("a", 1024, "WAL")
    f.commit("a", n=20)
    a.execute("PRAGMA wal_checkpoint(PASSIVE)")  # pages in the file: snapshot parts
    p1 = f.commit("a", n=4)
    f.ship("a", cfg_stored)
    assert f.head("a") == p1[:2], (f.head("a"), p1)
    removed = [("removed", "a", f"{p1[0]}:{p1[1]}", "-")]
    time.sleep(0.03)
    removed.append(("removed", "a", rfc3339(int(time.time() * 1000)), "-"))
    time.sleep(0.03)
    p2 = f.commit("a", n=12, update=True)  # several pages: a multi-frame batch
    f.ship("a", cfg_stored)
    f.state("a", p2)

    # tenant b: shipped only while its last connection is closed (no WAL)
    f.open("b", 512, "WAL")
    f.commit("b", n=5)
    pb1 = f.commit("b", n=3)
    f.conns.pop("b").close()
    f.ship("b", cfg_default)
    f.state("b", ("g-none", 0, pb1[2]))  # no WAL shipped: no frame

    ck1 = f.checkpoint()
    f.points += [("checkpoint", "a", str(ck1), p2[2]), ("checkpoint", "b", str(ck1), pb1[2])]

    p3 = f.commit("a", n=2, delete=True)
    f.ship("a", cfg_stored)
    f.state("a", p3)
    p4 = f.commit("a", n=1)
    f.ship("a", cfg_default)  # one small tail: its batch inline (manifest v2)
    f.state("a", p4)

    f.open("b", 512, "WAL")
    pb2 = f.commit("b", n=2, update=True)
    f.conns.pop("b").close()
    f.ship("b", cfg_default)
    f.state("b", ("g-none", 0, pb2[2]))

    # a re-base: the last connection closes while walship is not running
    a.close()
    assert not os.path.exists(f.path("a") + "-wal")
    a = f.open("a", 1024, "WAL")
    p5 = f.commit("a", n=2)
    f.ship("a", cfg_default)
    f.state("a", p5)

    # one replicate that stays up: NEXT_GENs and carried, merged manifests
    def carried():
        wm = json.loads(f.run("ls", "--sink", f.url, "--tenant", "a", "--json").stdout)["watermark"]
        return wm["carried"]

    def live(commits, crash=False):
        """Commits shipped by one running replicate; with crash, small ones
        go on until the last watermark carries its manifest (at least
        `commits`), and replicate is killed: the watermark stays as the
        last tail wrote it (v3), where a stop's drain may store it first."""
        rep = subprocess.Popen([f.ws, "replicate", "--config", cfg_carry, "--quiet",
                                f"a={f.path('a')}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
        time.sleep(0.3)
        states = []
        while len(states) < commits or (crash and not carried() and len(states) < commits + 20):
            i = len(states)
            states.append(f.commit("a", n=1 if crash else 1 + i % 3, update=(not crash and i % 4 == 3)))
            f.wait_shipped("a", states[-1][0], states[-1][1])
            f.now_point("a", states[-1][2]) if i % 3 == 0 else None
        rep.send_signal(signal.SIGKILL if crash else signal.SIGTERM)
        err = rep.communicate(timeout=60)[1]
        if not crash and rep.returncode != 0:
            sys.exit(f"replicate: exit {rep.returncode}\n{err}")
        # the watermark's generation, which --frame N names
        live_gen = f.head("a")[0] if crash else None
        for pos in states:
            f.state("a", pos, kind_time=False, live=live_gen)
        return states[-1]

    live(12)
    ck2 = f.checkpoint()
    head_a = f.commit("a", n=0)  # reads the state the cut holds
    f.points += [("checkpoint", "a", str(ck2), head_a[2]), ("checkpoint", "b", str(ck2), pb2[2])]
    gone = f.run("retention", "--sink", f.url, "--keep-checkpoints", "2").stdout.split()
    assert gone, "retention removed nothing"
    f.points += removed
    last = live(5, crash=True)
    assert carried(), "the last watermark of tenant a does not carry its manifest"
    f.points.append(("head", "a", "-", last[2]))
    f.points.append(("head", "b", "-", pb2[2]))
    for c in f.conns.values():
        c.close()
    return gone


def restore_checks(f):
    """Today's walship restores every point to what the source held."""
    f.run("verify", "--sink", f.url)
    out = os.path.join(f.work, "r.db")
    for kind, tenant, where, want in f.points:
        args = ["restore", "--sink", f.url, "--tenant", tenant, "-o", out]
        if kind in ("frame", "time", "checkpoint", "liveframe"):
            args += ["--" + kind.replace("live", ""), where]
        elif kind == "removed":
            args += ["--time" if where.endswith("Z") else "--frame", where]
        if os.path.exists(out):
            os.remove(out)
        p = f.run(*args, check=kind != "removed")
        if kind == "removed":
            assert p.returncode == 1 and not os.path.exists(out), (where, p.stderr)
            continue
        c = sqlite3.connect(out)
        got = digest(c)
        c.close()
        assert got == want, f"{kind} {tenant} {where}: restored {got}, source held {want}"


def coverage(sink):
    """What the fixture holds, by object kind and version."""
    seen = {}
    for root, _dirs, files in os.walk(sink):
        for name in files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, sink)
            with open(path, "rb") as fh:
                head = fh.read(16)
            tag = None
            if head[:8] in (b"WSMANIF1", b"WSWMARK1", b"WSBATCH1", b"WSSNAPP1"):
                tag = f"{head[:8].decode()} v{struct.unpack('<I', head[8:12])[0]}"
            elif rel.startswith("checkpoints/"):
                tag = "checkpoints/" + rel.split("/")[1]
            if tag:
                seen[tag] = seen.get(tag, 0) + 1
    return seen


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: make_fixture_v1.py WALSHIP [OUTDIR]")
    here = os.path.dirname(os.path.abspath(__file__))
    outdir = sys.argv[2] if len(sys.argv) == 3 else os.path.join(here, "format_v1")
    work = tempfile.mkdtemp(prefix="walship-fixture-")
    f = Fixture(os.path.abspath(sys.argv[1]), work)
    gone = build(f)
    restore_checks(f)
    for root, _dirs, files in os.walk(f.sink):  # lock files: never read
        for name in files:
            if name.startswith(".lock."):
                os.remove(os.path.join(root, name))
    f.run("verify", "--sink", f.url)
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    shutil.copytree(f.sink, os.path.join(outdir, "sink"))
    with open(os.path.join(outdir, "expected.txt"), "w") as out:
        out.write("# made by tests/data/make_fixture_v1.py with "
                  + f.run("version").stdout.strip() + "\n")
        out.write("# KIND TENANT WHERE SHA256 (fixture_digest.py of the source's state)\n")
        for p in f.points:
            out.write(" ".join(p) + "\n")
    print(json.dumps({"retention_removed": len(gone), "objects": coverage(f.sink)}, indent=1, sort_keys=True))
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
