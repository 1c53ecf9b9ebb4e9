#!/usr/bin/env python3
"""Where a throttled run's RPO goes, per tenant and per tail.

    walship-bench ... --tenant-csv T.csv --debug 2> T.log
    bench/throttle_timeline.py T.log T.csv [--over 2000] [--tenant t00001]

From the --debug log (each line stamped with seconds since the load began)
it groups every tenant's writes into tails (a tail ends with its watermark
write) and prints, per tenant, each tail's writes (b: batch, m: manifest,
s: snapshot part, w: watermark; a write refused shows as R and its attempt
count), how long its first write waited for its turn at the pacer, and the
deferrals. From the tenants' age series (--tenant-csv) it then takes every
stretch where a tenant's watermark age was over --over ms and names what
made it: the tails of that tenant whose watermark landed in it, how long
each took from its first write's turn to its watermark, and any refusal or
deferral in the stretch. A summary counts, over the stretches, the writes
per tail, refusals and turn waits.
"""
import argparse
import re
import sys
from collections import defaultdict

WRITE = re.compile(r"^(-?\d+\.\d+) walship: debug: s3 \S+: (PUT|POST|DELETE) (\S+): (failed, HTTP|HTTP) (-?\d+) "
                   r"after (\d+) attempt\(s\), paced (\d+) ms( \(its turn taken before\))?")
TURN = re.compile(r"^(-?\d+\.\d+) walship: debug: shard \d+: tenant (\S+) waits (\d+) ms for its write's turn")
DEFER = re.compile(r"^(-?\d+\.\d+) walship: debug: shard \d+: .* \(tenant (\S+) again in (\d+) ms\)")
TENANT = re.compile(r"(?:^|/)(t\d{5})/(.*)$")


def kind(rest):
    base = rest.rsplit("/", 1)[-1]
    if rest == "wm":
        return "w"
    return {"m": "m", "b": "b", "s": "s"}.get(base[:1], "?")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("tenants_csv", nargs="?")
    ap.add_argument("--over", type=int, default=2000, help="age in ms that makes a stretch (default 2000)")
    ap.add_argument("--from-s", type=float, default=0.0, help="leave out what comes before (s)")
    ap.add_argument("--tenant", help="print only this tenant's tails")
    a = ap.parse_args()

    writes = defaultdict(list)   # tenant -> [(t, kind, ok, status, attempts, paced, turn)]
    turns = defaultdict(list)    # tenant -> [(t, ms)]
    defers = defaultdict(list)   # tenant -> [(t, ms)]
    with open(a.log, errors="replace") as f:
        for line in f:
            m = WRITE.match(line)
            if m:
                tm = TENANT.search(m.group(3))
                if not tm:
                    continue
                writes[tm.group(1)].append((float(m.group(1)), kind(tm.group(2)), m.group(4) == "HTTP" and
                                            200 <= int(m.group(5)) < 300, int(m.group(5)), int(m.group(6)),
                                            int(m.group(7)), bool(m.group(8))))
                continue
            m = TURN.match(line)
            if m:
                turns[m.group(2)].append((float(m.group(1)), int(m.group(3))))
                continue
            m = DEFER.match(line)
            if m:
                defers[m.group(2)].append((float(m.group(1)), int(m.group(3))))

    # tails: runs of writes ending with an accepted watermark
    tails = defaultdict(list)    # tenant -> [dict]
    for name, ws in writes.items():
        cur = []
        for w in ws:
            cur.append(w)
            if w[1] == "w" and w[2]:
                tails[name].append({"end": w[0], "start": cur[0][0], "writes": cur})
                cur = []
            elif not w[2]:
                tails[name].append({"end": None, "start": cur[0][0], "writes": cur})
                cur = []

    def tail_str(tl):
        ks = "".join((w[1] if w[2] else "R") for w in tl["writes"])
        paced = sum(w[5] for w in tl["writes"])
        return "%s%s paced %d ms" % (ks, "" if tl["end"] else " (refused, deferred)", paced)

    names = sorted(set(writes) | set(turns))
    for name in names:
        if a.tenant and name != a.tenant:
            continue
        print("== %s: %d writes, %d refused, %d tails, %d turn waits (%d ms), %d deferrals" % (
            name, len(writes[name]), sum(1 for w in writes[name] if not w[2]), len(tails[name]),
            len(turns[name]), sum(t[1] for t in turns[name]), len(defers[name])))
        if a.tenant:
            for tl in tails[name]:
                print("  %8.3f..%s  %s" % (tl["start"], "%8.3f" % tl["end"] if tl["end"] else "   -    ",
                                           tail_str(tl)))

    if not a.tenants_csv:
        return
    with open(a.tenants_csv) as f:
        next(f)
        rows = [[float(x) for x in line.strip().split(",")] for line in f if line.strip()]
    if not rows:
        return
    order = ["t%05d" % i for i in range(len(rows[0]) - 1)]
    print("\n== stretches with a watermark age over %d ms (from %.1f s on)" % (a.over, a.from_s))
    per_tail_writes = defaultdict(int)
    refusals = turn_ms = nstretch = 0
    for i, name in enumerate(order):
        start = None
        peak = 0
        for r in rows + [[rows[-1][0] + 1] + [0] * len(order)]:
            t, age = r[0], r[i + 1]
            if t < a.from_s:
                continue
            if age > a.over:
                if start is None:
                    start = t
                peak = max(peak, age)
                continue
            if start is None:
                continue
            # the stretch [start, t): the tails that ended it or ran in it
            lo = start - peak / 1000.0
            tl = [x for x in tails[name] if x["end"] is None and lo <= x["start"] <= t or
                  x["end"] is not None and lo <= x["end"] <= t + 0.5]
            tw = [x for x in turns[name] if lo <= x[0] <= t + 0.5]
            df = [x for x in defers[name] if lo <= x[0] <= t + 0.5]
            nstretch += 1
            for x in tl:
                per_tail_writes[len(x["writes"])] += 1
                refusals += sum(1 for w in x["writes"] if not w[2])
            turn_ms += sum(x[1] for x in tw)
            print("  %s %6.2f..%6.2f s, peak %5d ms: tails %s; turn waits %s; deferrals %s" % (
                name, start, t, peak,
                " | ".join("%.2f-%s %s" % (x["start"], "%.2f" % x["end"] if x["end"] else "?", tail_str(x))
                           for x in tl) or "-",
                ",".join("%.2f:%d" % x for x in tw) or "-", ",".join("%.2f:%d" % x for x in df) or "-"))
            start = None
            peak = 0
    print("\n%d stretches; writes per tail in them %s; refused writes %d; turn waits %d ms" % (
        nstretch, dict(sorted(per_tail_writes.items())), refusals, turn_ms))


if __name__ == "__main__":
    sys.exit(main())
