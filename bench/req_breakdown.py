#!/usr/bin/env python3
"""What a tool sent to the store, by method, kind of key and phase.

    req_breakdown.py listen FILE          receive the proxy's per-request log
                                          (tests/s3/throttle.sh start --log)
                                          on a free UDP port of 127.0.0.1,
                                          print the port, append each line to
                                          FILE until SIGTERM
    req_breakdown.py table FILE T0 T1 T2 [--commits N] [--out CSV]
                                          the requests logged from T0 to T2
                                          (seconds since the epoch), split at
                                          T1: "start-up" before it (each
                                          tenant's first copy, the first
                                          reads), "tails" from it on (the
                                          writer began at T1)

A line of the log (throttle.sh --log): TIME METHOD URI STATUS BYTES CLEN,
BYTES what the client sent for the request (request line, headers, body:
haproxy's %U, the bytes its frontend's `bin` counter adds up), CLEN its
Content-Length header (`-`: none, no body). Header bytes are BYTES - CLEN
(the request line included), body bytes CLEN.

Kinds of key (path-style URIs, /BUCKET/KEY; docs/FORMAT.md "Keys"):
walship's watermark (TENANT/wm), manifest (m<seq>-<sha>), batch
(b<first>-...), snapshot part (s<frame>-<seq>/<page>-<xxh>), its probe
(_walship/probe-*) and anything else under _walship/; Litestream's WAL
segments (.../wal/...) and snapshots (.../snapshots/...) and other keys;
bucket-level requests (a LIST: ?list-type=2, ?prefix=, ?delimiter=).
"""
import collections
import os
import re
import signal
import socket
import sys

PHASES = ("start-up", "tails")


def listen(path):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1], flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with open(path, "a", buffering=1) as f:
        while True:
            data = s.recv(65536)
            f.write(data.decode(errors="replace").rstrip("\n") + "\n")


def kind_of(uri):
    path, _, query = uri.partition("?")
    parts = path.lstrip("/").split("/", 1)
    key = parts[1] if len(parts) > 1 else ""
    if not key:
        return "LIST" if re.search(r"(^|&)(list-type|prefix|delimiter)=", query) else "bucket"
    last = key.rsplit("/", 1)[-1]
    if key.startswith("_walship/probe-"):
        return "probe"
    if key.startswith("_walship/"):
        return "_walship/ other"
    if last == "wm":
        return "watermark"
    if re.fullmatch(r"m[0-9a-f]{16}-[0-9a-f]+", last):
        return "manifest"
    if re.fullmatch(r"b[0-9a-f]{16}-.*", last):
        return "batch"
    if re.search(r"/s[0-9a-f]{16}(-[0-9a-f]{16})?/[0-9a-f]{8}-[0-9a-f]{16}$", key):
        return "snapshot part"
    if "/wal/" in key:
        return "ls WAL segment"
    if "/snapshots/" in key:
        return "ls snapshot"
    return "other"


def read_log(path, t0, t2):
    rows = []
    bad = 0
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) != 6:
                bad += 1
                continue
            try:
                t = float(w[0])
                nbytes = int(w[4])
                clen = 0 if w[5] == "-" else int(w[5])
            except ValueError:
                bad += 1
                continue
            # A connection closed before it sent a request: no request
            # (peer_report.py haproxy-stat leaves these out too).
            if w[1] == "<BADREQ>" and nbytes == 0:
                continue
            if t0 <= t <= t2:
                rows.append((t, w[1], w[2], w[3], nbytes, clen))
    return rows, bad


def table(path, t0, t1, t2, commits=0, out_csv=None):
    rows, bad = read_log(path, t0, t2)
    agg = collections.defaultdict(lambda: [0, 0, 0])  # (phase, method, kind) -> requests, header, body
    for t, method, uri, _status, nbytes, clen in rows:
        k = (PHASES[0] if t < t1 else PHASES[1], method, kind_of(uri))
        a = agg[k]
        a[0] += 1
        a[1] += nbytes - clen
        a[2] += clen
    keys = sorted({(m, k) for _, m, k in agg}, key=lambda mk: (-sum(agg[(p,) + mk][0] for p in PHASES), mk))
    print("%-6s %-15s | %-29s | %-29s" % ("", "", "start-up (before the writer)", "tails (the writer on)"))
    print("%-6s %-15s | %6s %10s %10s | %6s %10s %10s | %8s" % (
        "method", "key", "reqs", "hdr B", "body B", "reqs", "hdr B", "body B", "B/req"))
    tot = {p: [0, 0, 0] for p in PHASES}
    for m, k in keys:
        cells = []
        for p in PHASES:
            a = agg.get((p, m, k), [0, 0, 0])
            cells += a
            for i in range(3):
                tot[p][i] += a[i]
        n = cells[0] + cells[3]
        per = (cells[1] + cells[2] + cells[4] + cells[5]) / n if n else 0
        print("%-6s %-15s | %6d %10d %10d | %6d %10d %10d | %8.0f" % ((m, k) + tuple(cells) + (per,)))
    cells = tot[PHASES[0]] + tot[PHASES[1]]
    n = cells[0] + cells[3]
    print("%-6s %-15s | %6d %10d %10d | %6d %10d %10d | %8.0f" % (
        ("all", "") + tuple(cells) + ((sum(cells) - n) / n if n else 0,)))
    for p in PHASES:
        r, h, b = tot[p]
        if r:
            print("%s: %d requests, %d bytes (headers %d = %.0f a request, %.0f%% of the bytes; bodies %d)" % (
                p, r, h + b, h, h / r, 100.0 * h / (h + b) if h + b else 0, b))
    if commits and tot["tails"][0]:
        r, h, b = tot["tails"]
        print("tails: %.2f requests and %.0f bytes sent per commit (%d commits)" % (r / commits, (h + b) / commits, commits))
    if bad:
        print("(%d log lines not understood, left out)" % bad)
    if out_csv:
        with open(out_csv, "w") as f:
            f.write("phase,method,kind,requests,header_bytes,body_bytes\n")
            for (p, m, k), a in sorted(agg.items()):
                f.write("%s,%s,%s,%d,%d,%d\n" % (p, m, k, a[0], a[1], a[2]))
    return len(rows), sum(h + b for h, b in ((a[1], a[2]) for a in agg.values()))


def main(argv):
    if len(argv) >= 2 and argv[0] == "listen":
        listen(argv[1])
        return 0
    if len(argv) >= 5 and argv[0] == "table":
        commits, out_csv, rest = 0, None, argv[5:]
        while rest:
            if rest[0] == "--commits" and len(rest) > 1:
                commits = int(rest[1])
            elif rest[0] == "--out" and len(rest) > 1:
                out_csv = rest[1]
            else:
                raise SystemExit("req_breakdown.py table: unknown argument %r" % rest[0])
            rest = rest[2:]
        if not os.path.exists(argv[1]):
            raise SystemExit("req_breakdown.py table: no log %s" % argv[1])
        table(argv[1], float(argv[2]), float(argv[3]), float(argv[4]), commits, out_csv)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
