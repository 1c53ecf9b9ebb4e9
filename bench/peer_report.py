#!/usr/bin/env python3
"""The measuring side of bench/run_peer_bench.sh.

    peer_report.py poll TOOL URL DONE OBS TENANT...
        Every round (at most one per --poll-ms, env WS_PEER_POLL_MS, default
        100), asks the store directly (not through the counting proxy) how
        far each tenant's replica reaches in its WAL, and appends a line
        `tenant time position` to OBS each time a position grows. TOOL
        walship: GET <tenant>/wm, position = 32 + last_frame * (24 +
        page_size); a version 4 watermark (manifest slots) names only a
        hint: the head is found by GETting the slot after it
        (<tenant>/e<E>-p<P>/l<lane:016x>/m<seq+1:016x>, in the hint slot's
        lane, or the watermark's) until one is absent, a close record
        (WSCLOSE1) moving on in its closer's lane at the same sequence,
        and the head found is kept per tenant, so that a round costs one
        GET per tenant when nothing was shipped. TOOL litestream: ListObjectsV2 of
        <tenant>/generations/ (only keys after the last one seen), then each
        new WAL segment <index>_<offset>.wal.lz4 fetched once and its LZ4
        frame's decompressed length added to its offset. Stops once DONE
        exists (the writer's last line per tenant: its final WAL size) and
        every tenant has reached it; exit 1 after WS_PEER_DRAIN_S (default
        120) seconds without, or when a replica leaves the WAL the writer
        wrote (a new WAL generation or Litestream WAL index: the position
        would mean another file). Prints the rounds' median and longest
        duration (the resolution: each tenant is looked at once a round).
    peer_report.py ready TOOL URL TENANT...
        waits (60 s at most, else exit 1) until every tenant has its first
        object in the store: walship's watermark, Litestream's snapshot
    peer_report.py rpo COMMITS OBS      per commit (COMMITS: `tenant time
                                        wal_size` after it), the time from
                                        the commit to the first observation
                                        reaching its size: p50 p99 max
                                        (seconds) and the number of commits
    peer_report.py haproxy-stat ADMIN   the proxy frontend's requests and
                                        request bytes (`show stat` on
                                        haproxy's admin socket HOST:PORT);
                                        requests: req_tot less ereq (a
                                        connection closed before sending
                                        a request counts in both)
    peer_report.py summary CSV JSON     medians (min..max) per row and the
                                        ratios walship/Litestream of the
                                        same repetition; JSON: medians
URL is s3://BUCKET?endpoint=E (AWS_* credentials in the environment).
"""
import datetime
import hashlib
import hmac
import http.client
import json
import os
import re
import socket
import statistics
import struct
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seal_report import fmt, spread  # noqa: E402  (the benches' one median (min..max))


class S3:
    """A minimal SigV4 client on one keep-alive connection."""

    def __init__(self, endpoint):
        u = urllib.parse.urlparse(endpoint)
        self.host = u.netloc
        self.ak = os.environ["AWS_ACCESS_KEY_ID"]
        self.sk = os.environ["AWS_SECRET_ACCESS_KEY"]
        self.region = os.environ.get("AWS_REGION", "us-east-1")
        self.conn = http.client.HTTPConnection(self.host, timeout=30)

    def _headers(self, method, path, query):
        now = datetime.datetime.now(datetime.timezone.utc)
        amz, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        q = "&".join("%s=%s" % (urllib.parse.quote(k, safe="-_.~"), urllib.parse.quote(v, safe="-_.~"))
                     for k, v in sorted(query.items()))
        h = {"host": self.host, "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "x-amz-date": amz}
        signed = ";".join(sorted(h))
        creq = "\n".join([method, urllib.parse.quote(path, safe="/-_.~"), q,
                          "".join("%s:%s\n" % (k, h[k]) for k in sorted(h)), signed, "UNSIGNED-PAYLOAD"])
        scope = "%s/%s/s3/aws4_request" % (day, self.region)
        sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope, hashlib.sha256(creq.encode()).hexdigest()])
        k = ("AWS4" + self.sk).encode()
        for part in (day, self.region, "s3", "aws4_request"):
            k = hmac.new(k, part.encode(), hashlib.sha256).digest()
        sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
        h["Authorization"] = "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (
            self.ak, scope, signed, sig)
        return h, q

    def get(self, bucket, key, query=None):
        """(status, body) of a GET; one retry on a dropped connection."""
        path = "/%s/%s" % (bucket, key) if key else "/%s" % bucket
        for attempt in (0, 1):
            h, q = self._headers("GET", path, query or {})
            try:
                self.conn.request("GET", urllib.parse.quote(path, safe="/-_.~") + ("?" + q if q else ""),
                                  headers=h)
                r = self.conn.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, timeout=30)
                if attempt:
                    raise
        return None


def lz4_block_len(b):
    """Decompressed length of one LZ4 block, from its sequences alone."""
    i, n, end = 0, 0, len(b)
    while i < end:
        tok = b[i]
        i += 1
        lit = tok >> 4
        if lit == 15:
            while True:
                x = b[i]
                i += 1
                lit += x
                if x != 255:
                    break
        n += lit
        i += lit
        if i >= end:
            break
        i += 2
        ml = tok & 15
        if ml == 15:
            while True:
                x = b[i]
                i += 1
                ml += x
                if x != 255:
                    break
        n += ml + 4
    return n


def lz4_frame_len(b):
    """Decompressed length of an LZ4 frame (Litestream's .lz4 objects)."""
    if b[:4] != b"\x04\x22\x4d\x18":
        raise ValueError("not an LZ4 frame")
    flg, p = b[4], 6
    if flg & 0x08:
        return struct.unpack_from("<Q", b, p)[0]
    if flg & 0x01:
        p += 4
    p += 1
    total = 0
    while True:
        sz = struct.unpack_from("<I", b, p)[0]
        p += 4
        if sz == 0:
            return total
        raw, sz = sz & 0x80000000, sz & 0x7FFFFFFF
        total += sz if raw else lz4_block_len(b[p:p + sz])
        p += sz + (4 if flg & 0x10 else 0)


def wm_position(body):
    """(generation, WAL end offset) a walship watermark names."""
    if body[:8] != b"WSWMARK1":
        raise ValueError("not a watermark")
    tlen = struct.unpack_from("<H", body, 16)[0]
    p = 18 + tlen + 32
    magic, ckseq, s1, s2, page = struct.unpack_from("<5I", body, p)
    last = struct.unpack_from("<Q", body, p + 20)[0]
    return (ckseq, s1, s2), (32 + last * (24 + page) if last else 0)


SLOT_KEY = re.compile(r"^(.+)/e([0-9]+)-p([0-9]+)/l([0-9a-f]{16})/m([0-9a-f]{16})$")


def slot_key(tenant, epoch, pg, lane, seq):
    return "%s/e%d-p%d/l%016x/m%016x" % (tenant, epoch, pg, lane, seq)


def wm_hint(body):
    """A version 4 watermark's (epoch, pointer generation, lane, hint seq,
    hint key, generation, WAL end offset); None for versions 1..3."""
    version = struct.unpack_from("<I", body, 8)[0]
    if version != 4:
        return None
    tlen = struct.unpack_from("<H", body, 16)[0]
    p = 18 + tlen
    epoch, pg, seq = struct.unpack_from("<3Q", body, p)
    gen, pos = wm_position(body)
    p += 32 + 20 + 8 + 8
    klen = struct.unpack_from("<H", body, p)[0]
    key = body[p + 2:p + 2 + klen].decode()
    p += 2 + klen + 32 + 8
    lane = struct.unpack_from("<Q", body, p)[0]
    return epoch, pg, lane, seq, key, gen, pos


def slot_manifest(body):
    """(generation, WAL end offset) of a version 4 manifest (a slot)."""
    if body[:8] != b"WSMANIF1" or struct.unpack_from("<I", body, 8)[0] != 4:
        raise ValueError("not a version 4 manifest")
    tlen = struct.unpack_from("<H", body, 16)[0]
    p = 18 + tlen + 32
    magic, ckseq, s1, s2, page = struct.unpack_from("<5I", body, p)
    last = struct.unpack_from("<Q", body, p + 20 + 4 + 8)[0]
    return (ckseq, s1, s2), (32 + last * (24 + page) if last else 0)


def slot_close(body):
    """(closer epoch, closer pointer generation, closer lane, seq) of a close
    record; closer lane 0 when removed."""
    tlen = struct.unpack_from("<H", body, 16)[0]
    p = 18 + tlen
    _, _, _, seq, cep, cpg, clane = struct.unpack_from("<7Q", body, p)
    return cep, cpg, clane, seq


def slot_head(s3, bucket, t, body=None):
    """(generation, WAL end offset) of the head of a tenant whose watermark
    is version 4: from the watermark's hint (body, its bytes) or else the
    head found before (t.slot), the next slot until one is absent."""
    if body is not None:
        epoch, pg, lane, seq, key, gen, pos = wm_hint(body)
        m = SLOT_KEY.match(key)
        if m and m.group(1) == t.name:  # the hint's own lane
            epoch, pg, lane = int(m.group(2)), int(m.group(3)), int(m.group(4), 16)
        t.slot = (epoch, pg, lane, seq, gen, pos)
    epoch, pg, lane, seq, gen, pos = t.slot
    while True:
        key = slot_key(t.name, epoch, pg, lane, seq + 1)
        st, slot = s3.get(bucket, key)
        if st == 404:
            break
        if st != 200:
            raise RuntimeError("GET %s: HTTP %d" % (key, st))
        if slot[:8] == b"WSCLOSE1":
            cep, cpg, clane, cseq = slot_close(slot)
            if clane == 0 or cseq != seq + 1:
                raise RuntimeError("%s: a close by removal or at another sequence" % key)
            epoch, pg, lane = cep, cpg, clane  # the closer's lane, the same sequence
            t.slot = (epoch, pg, lane, seq, gen, pos)
            continue
        gen, pos = slot_manifest(slot)
        seq += 1
        t.slot = (epoch, pg, lane, seq, gen, pos)
    return gen, pos


LS_WAL = re.compile(r"/generations/([0-9a-f]+)/wal/([0-9a-f]+)_([0-9a-f]+)\.wal\.lz4$")


class Tenant:
    def __init__(self, name):
        self.name, self.pos, self.gen, self.after, self.broken = name, 0, None, "", None
        self.slot = None  # walship with slots: the head found, (epoch, pg, lane, seq, generation, position)


def observe(s3, bucket, tool, t):
    if tool == "walship":
        if t.slot is not None:
            # Slots: on from the head found before (one GET when nothing
            # new); the watermark is not read again: the bench's one owner
            # keeps its lane, and a lane left is closed (followed here).
            gen, pos = slot_head(s3, bucket, t)
        else:
            st, body = s3.get(bucket, t.name + "/wm")
            if st == 404:
                return 0
            if st != 200:
                raise RuntimeError("GET %s/wm: HTTP %d" % (t.name, st))
            if wm_hint(body) is not None:
                gen, pos = slot_head(s3, bucket, t, body)
            else:
                gen, pos = wm_position(body)
        if pos == 0:  # before the first commit: the WAL has no header, no generation yet
            return 0
        if t.gen is None:
            t.gen = gen
        elif gen != t.gen:
            t.broken = "a new WAL generation"
        return pos
    q = {"list-type": "2", "prefix": t.name + "/generations/"}
    pos = t.pos
    while True:
        if t.after:
            q["start-after"] = t.after
        st, body = s3.get(bucket, "", q)
        if st != 200:
            raise RuntimeError("list %s: HTTP %d" % (t.name, st))
        text = body.decode()
        keys = re.findall(r"<Key>([^<]+)</Key>", text)
        for k in keys:
            m = LS_WAL.search(k)
            if not m:
                continue
            gen, idx, off = m.group(1), int(m.group(2), 16), int(m.group(3), 16)
            if t.gen is None:
                t.gen = (gen, idx)
            elif t.gen != (gen, idx):
                t.broken = "a new Litestream generation or WAL index (%s %d)" % (gen, idx)
                continue
            st, seg = s3.get(bucket, k)
            if st != 200:
                raise RuntimeError("GET %s: HTTP %d" % (k, st))
            pos = max(pos, off + lz4_frame_len(seg))
        if keys:
            t.after = keys[-1]
        if "<IsTruncated>true</IsTruncated>" not in text:
            return pos


def poll(tool, url, done, obs_path, names):
    u = urllib.parse.urlparse(url)
    bucket = u.netloc
    endpoint = urllib.parse.parse_qs(u.query)["endpoint"][0]
    every = float(os.environ.get("WS_PEER_POLL_MS", "100")) / 1000
    drain = float(os.environ.get("WS_PEER_DRAIN_S", "120"))
    tenants = [Tenant(n) for n in names]
    nthreads = min(4, len(tenants))
    out = open(obs_path, "w")
    lock = threading.Lock()
    state = {"stop": False, "err": None}

    rounds = []

    def worker(mine):
        s3 = S3(endpoint)
        while not state["stop"]:
            t0 = time.monotonic()
            for t in mine:
                try:
                    pos = observe(s3, bucket, tool, t)
                except Exception as e:  # noqa: BLE001 - reported, then the poll stops
                    state["err"] = "%s: %s" % (t.name, e)
                    state["stop"] = True
                    return
                now = time.time()
                if pos > t.pos:
                    t.pos = pos
                    with lock:
                        out.write("%s %.6f %d\n" % (t.name, now, pos))
            with lock:
                rounds.append(max(every, time.monotonic() - t0))
            time.sleep(max(0.0, t0 + every - time.monotonic()))

    threads = [threading.Thread(target=worker, args=(tenants[i::nthreads],)) for i in range(nthreads)]
    for th in threads:
        th.start()
    deadline = None
    final = {}
    rc = 0
    while True:
        time.sleep(0.1)
        if state["err"]:
            print("peer_report.py poll: %s" % state["err"], file=sys.stderr)
            rc = 1
            break
        broken = [t for t in tenants if t.broken]
        if broken:
            print("peer_report.py poll: %s: %s: positions no longer name the writer's WAL" % (
                broken[0].name, broken[0].broken), file=sys.stderr)
            rc = 1
            break
        if deadline is None and os.path.exists(done):
            deadline = time.monotonic() + drain
            with open(done) as f:
                for line in f:
                    n, _, size = line.split()
                    final[n] = int(size)
        if deadline is not None:
            if all(t.pos >= final.get(t.name, 0) for t in tenants):
                break
            if time.monotonic() > deadline:
                late = [t.name for t in tenants if t.pos < final.get(t.name, 0)]
                print("peer_report.py poll: %d tenant(s) not shipped %d s after the writer ended (%s: %d of %d)" % (
                    len(late), drain, late[0], next(t.pos for t in tenants if t.name == late[0]),
                    final[late[0]]), file=sys.stderr)
                rc = 1
                break
    state["stop"] = True
    for th in threads:
        th.join()
    out.close()
    # The resolution: a tenant is looked at once a round.
    if rounds:
        print("poll round ms: median %.0f max %.0f" % (statistics.median(rounds) * 1000, max(rounds) * 1000))
    return rc


def ready(tool, url, names):
    u = urllib.parse.urlparse(url)
    bucket = u.netloc
    s3 = S3(urllib.parse.parse_qs(u.query)["endpoint"][0])
    waiting = list(names)
    deadline = time.monotonic() + 60
    while waiting:
        n = waiting[0]
        if tool == "walship":
            st, _ = s3.get(bucket, n + "/wm")
            there = st == 200
        else:
            st, body = s3.get(bucket, "", {"list-type": "2", "prefix": n + "/generations/"})
            there = st == 200 and b"/snapshots/" in body
        if there:
            waiting.pop(0)
            continue
        if time.monotonic() > deadline:
            print("peer_report.py ready: %s has stored nothing for %s in 60 s" % (tool, n), file=sys.stderr)
            return 1
        time.sleep(0.1)
    return 0


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def rpo(commits_path, obs_path):
    obs = {}
    with open(obs_path) as f:
        for line in f:
            n, t, pos = line.split()
            obs.setdefault(n, []).append((float(t), int(pos)))
    lags = []
    with open(commits_path) as f:
        for line in f:
            n, t, size = line.split()
            t, size = float(t), int(size)
            seen = next((ot for ot, pos in obs.get(n, []) if pos >= size), None)
            if seen is None:
                raise SystemExit("peer_report.py rpo: tenant %s: a commit never observed shipped" % n)
            lags.append(max(0.0, seen - t))
    if not lags:
        raise SystemExit("peer_report.py rpo: no commits")
    print("%.4f %.4f %.4f %d" % (quantile(lags, 0.5), quantile(lags, 0.99), max(lags), len(lags)))


def haproxy_stat(admin):
    host, port = admin.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"show stat\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    lines = data.decode().splitlines()
    head = lines[0].lstrip("# ").split(",")
    for line in lines[1:]:
        r = dict(zip(head, line.split(",")))
        if r.get("svname") == "FRONTEND" and r.get("pxname") == "s3":
            # A connection closed before it sent a request (an HTTP client
            # dropping an idle keep-alive connection) counts in req_tot as
            # a bad request (ereq, logged <BADREQ>, 0 bytes): no request.
            print(int(r["req_tot"]) - int(r["ereq"]), r["bin"])
            return
    raise SystemExit("peer_report.py haproxy-stat: no frontend s3 in haproxy's stats")


# ---- summary --------------------------------------------------------------------------

MB = 1e6
# The figures of a run row (peer.csv) and how each is derived.
FIGS = [
    ("req_per_gb", "requests per GB of WAL", lambda r: r["requests"] / (r["wal_bytes"] / 1e9), "%.0f"),
    ("up_over_wal", "bytes uploaded / WAL bytes", lambda r: r["up_bytes"] / r["wal_bytes"], "%.3f"),
    ("rpo_p50", "RPO p50 s", lambda r: r["rpo_p50"], "%.3f"),
    ("rpo_p99", "RPO p99 s", lambda r: r["rpo_p99"], "%.3f"),
    ("cpu_per_mb", "CPU s per MB of WAL", lambda r: r["cpu_s"] / (r["wal_bytes"] / MB), "%.4f"),
    ("restore_s", "restore wall s", lambda r: r["restore_s"], "%.3f"),
    ("first_empty_s", "idle tenants to first Empty s", lambda r: r["seconds"], "%.2f"),
    ("rpo_p99_throttled", "RPO p99 at half the demanded PUT rate s", lambda r: r["rpo_p99"], "%.3f"),
]
NUM = ("rep", "tenants", "wal_bytes", "requests", "up_bytes", "cpu_s", "restore_s", "seconds", "ok")
FLOAT = ("rpo_p50", "rpo_p99", "cpu_s", "restore_s", "seconds")


def figures_of(row):
    """Which figures a row (scenario) gives."""
    sc = row["scenario"]
    if sc.startswith("live"):
        return ["req_per_gb", "up_over_wal", "rpo_p50", "rpo_p99", "cpu_per_mb"]
    if sc == "restore":
        return ["restore_s"]
    if sc == "start":
        return ["first_empty_s"]
    return ["rpo_p99_throttled"]


def load(path):
    rows = []
    with open(path) as f:
        head = f.readline().strip().split(",")
        for line in f:
            r = dict(zip(head, line.strip().split(",")))
            for k in head:
                if k in FLOAT or k in ("rpo_p50", "rpo_p99"):
                    r[k] = float(r[k]) if r[k] not in ("", "-") else None
                elif k in NUM:
                    r[k] = int(r[k]) if r[k] not in ("", "-") else None
            rows.append(r)
    return rows


def value(r, key):
    fn = next(f for k, _, f, _ in FIGS if k == key)
    try:
        return fn(r)
    except (TypeError, ZeroDivisionError):
        return None


# The further walship runs beside the default one: (tool, its JSON keys'
# stem, its ratio to walship's label, whether walship is the numerator).
EXTRAS = (("walship-base", "base", "walship/walship-base", True),  # run_peer_bench.sh --baseline: a second build
          ("walship-slots", "slots", "walship-slots/walship", False))  # --walship-slots: slots = on


def summary(csv_path, json_path):
    rows = [r for r in load(csv_path) if r["ok"] == 1]
    res = {}
    scenarios = []
    for r in rows:
        if r["scenario"] not in scenarios:
            scenarios.append(r["scenario"])
    extras = [x for x in EXTRAS if any(r["tool"] == x[0] for r in rows)]
    tools = ("walship",) + tuple(x[0] for x in extras) + ("litestream",)

    def ratio(per, a, b):
        return spread([v / per[b][rep] for rep, v in per[a].items() if v is not None and per[b].get(rep)])

    print("\n%-14s %-40s %-28s %s%-28s %s%s" % (
        "scenario", "figure", "walship", "".join("%-28s " % x[0] for x in extras), "litestream",
        "ratio walship/litestream (same rep)", "".join("   %-27s %-27s" % (x[0] + "/litestream", x[2]) for x in extras)))
    for sc in scenarios:
        rs = [r for r in rows if r["scenario"] == sc]
        res[sc] = {}
        for key in figures_of(rs[0]):
            label, f = next((l, f) for k, l, _, f in FIGS if k == key)
            per = {tool: {r["rep"]: value(r, key) for r in rs if r["tool"] == tool} for tool in tools}
            w, ls = spread(per["walship"].values()), spread(per["litestream"].values())
            # Both compress (walship zstd on s3:// by default, Litestream
            # LZ4): issue 33 asks for no more bytes than Litestream's.
            ratios = ratio(per, "walship", "litestream")
            res[sc][key] = {"walship": w, "litestream": ls, "ratio": ratios}
            lsnote = fmt(ls, f) if ls else "walship only"
            cols, more = "", ""
            for tool, stem, _, walship_over in extras:
                wx = spread(per[tool].values())
                rx = ratio(per, tool, "litestream")
                rw = ratio(per, "walship", tool) if walship_over else ratio(per, tool, "walship")
                res[sc][key].update({tool: wx, "ratio_" + stem: rx,
                                     ("ratio_walship_" + stem) if walship_over else ("ratio_%s_walship" % stem): rw})
                cols += "%-28s " % fmt(wx, f)
                more += "   %-27s %-27s" % (fmt(rx, "%.2f"), fmt(rw, "%.2f"))
            print("%-14s %-40s %-28s %s%-28s %s%s" % (sc, label, fmt(w, f), cols, lsnote, fmt(ratios, "%.2f"), more))
        polls = {tool: spread([float(r["poll_ms"]) for r in rs if r["tool"] == tool and r.get("poll_ms", "-") != "-"])
                 for tool in tools}
        if any(polls.values()):
            res[sc]["poll_round_ms"] = polls
            print("%-14s %-40s %-28s %s%-28s" % (sc, "RPO resolution: poll round ms", fmt(polls["walship"], "%.0f"),
                                                "".join("%-28s " % fmt(polls[x[0]], "%.0f") for x in extras),
                                                fmt(polls["litestream"], "%.0f")))
    with open(json_path, "w") as out:
        json.dump(res, out, indent=1)


def main(argv):
    if len(argv) >= 6 and argv[1] == "poll" and argv[2] in ("walship", "litestream"):
        return poll(argv[2], argv[3], argv[4], argv[5], argv[6:])
    if len(argv) >= 5 and argv[1] == "ready" and argv[2] in ("walship", "litestream"):
        return ready(argv[2], argv[3], argv[4:])
    if len(argv) == 4 and argv[1] == "rpo":
        rpo(argv[2], argv[3])
        return 0
    if len(argv) == 3 and argv[1] == "haproxy-stat":
        haproxy_stat(argv[2])
        return 0
    if len(argv) == 4 and argv[1] == "summary":
        summary(argv[2], argv[3])
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
