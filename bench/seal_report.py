#!/usr/bin/env python3
"""The figures of bench/run_seal_bench.sh.

    seal_report.py summary CSV JSON   medians (min..max) and same-repetition
                                      ratios against `none`, printed and
                                      written to JSON
    seal_report.py s3-bytes URL       the bytes a bucket holds (s3://B?endpoint=E,
                                      AWS_* credentials), by ListObjectsV2
"""
import json
import os
import re
import statistics
import subprocess
import sys
import urllib.parse

MB = 1e6


def spread(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def fmt(s, f="%.3f"):
    if s is None:
        return "-"
    return (f + " (" + f + ".." + f + ")") % (s["median"], s["min"], s["max"])


def load(path):
    rows = []
    with open(path) as f:
        head = f.readline().strip().split(",")
        for line in f:
            r = dict(zip(head, line.strip().split(",")))
            for k in ("rep", "wal_bytes", "stored_bytes", "restore_equal"):
                r[k] = int(r[k])
            for k in ("ship_s", "cpu_s", "restore_s"):
                r[k] = float(r[k])
            rows.append(r)
    return rows


def per_config(rows, wl, cfg):
    return [r for r in rows if r["workload"] == wl and r["config"] == cfg and r["restore_equal"]]


def ratio(rows, wl, cfg, base, key, invert):
    """Per repetition: cfg's figure against base's of the same repetition."""
    out = []
    for r in per_config(rows, wl, cfg):
        b = [x for x in per_config(rows, wl, base) if x["rep"] == r["rep"]]
        if b and r[key] > 0 and b[0][key] > 0:
            out.append(b[0][key] / r[key] if invert else r[key] / b[0][key])
    return spread(out)


def summary(csv_path, json_path):
    rows = load(csv_path)
    res = {"workloads": {}}
    for wl in sorted({r["workload"] for r in rows}, reverse=True):
        w = res["workloads"][wl] = {}
        cfgs = [c for c in ("none", "zstd", "zstd+key", "live", "litestream") if per_config(rows, wl, c)]
        print("\n%s (WAL %.1f MB; medians (min..max) of %d rep(s))" % (
            wl, per_config(rows, wl, cfgs[0])[0]["wal_bytes"] / MB, max(r["rep"] for r in rows)))
        print("  %-10s %-24s %-26s %-24s %-26s %-20s" % (
            "config", "stored/WAL", "ship MB/s (WAL)", "CPU s per MB of WAL", "restore MB/s (WAL)", "stored MB per GB WAL"))
        for c in cfgs:
            rs = per_config(rows, wl, c)
            once = c in ("none", "zstd", "zstd+key")
            st = spread([r["stored_bytes"] / r["wal_bytes"] for r in rs])
            sh = spread([r["wal_bytes"] / MB / r["ship_s"] for r in rs if r["ship_s"] > 0]) if once else None
            cpu = spread([r["cpu_s"] / (r["wal_bytes"] / MB) for r in rs])
            rest = spread([r["wal_bytes"] / MB / r["restore_s"] for r in rs if r["restore_s"] > 0])
            per_gb = spread([r["stored_bytes"] / MB / (r["wal_bytes"] / 1e9) for r in rs])
            w[c] = {"stored_over_wal": st, "ship_mb_s": sh, "cpu_s_per_mb": cpu, "restore_mb_s": rest,
                    "stored_mb_per_gb_wal": per_gb, "runs": len(rs)}
            print("  %-10s %-24s %-26s %-24s %-26s %-20s" % (c, fmt(st), fmt(sh, "%.1f"), fmt(cpu, "%.4f"),
                                                             fmt(rest, "%.1f"), fmt(per_gb, "%.0f")))
        for c in ("zstd", "zstd+key"):
            if c in w and "none" in w:
                w[c]["ship_rate_over_none"] = ratio(rows, wl, c, "none", "ship_s", True)
                w[c]["restore_rate_over_none"] = ratio(rows, wl, c, "none", "restore_s", True)
                print("ratio %s/none (%s): ship rate %s, restore rate %s" % (
                    c, wl, fmt(w[c]["ship_rate_over_none"]), fmt(w[c]["restore_rate_over_none"])))
        if "litestream" in w:
            for c in ("zstd+key", "live"):
                if c in w:
                    k = "cpu_over_litestream"
                    w[c][k] = ratio(rows, wl, c, "litestream", "cpu_s", False)
                    w[c]["stored_over_litestream"] = ratio(rows, wl, c, "litestream", "stored_bytes", False)
                    print("ratio %s/litestream (%s): CPU %s, stored bytes %s" % (
                        c, wl, fmt(w[c][k]), fmt(w[c]["stored_over_litestream"])))
    with open(json_path, "w") as f:
        json.dump(res, f, indent=1)


def s3_bytes(url):
    u = urllib.parse.urlparse(url)
    ep = urllib.parse.parse_qs(u.query)["endpoint"][0]
    auth = "%s:%s" % (os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
    sig = "aws:amz:%s:s3" % os.environ.get("AWS_REGION", "us-east-1")
    total, token = 0, None
    while True:
        q = "list-type=2" + ("&continuation-token=" + urllib.parse.quote(token, safe="") if token else "")
        body = subprocess.run(["curl", "-sS", "--fail", "--max-time", "30", "--aws-sigv4", sig, "--user", auth,
                               "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                               "%s/%s?%s" % (ep, u.netloc, q)], check=True, capture_output=True, text=True).stdout
        total += sum(int(x) for x in re.findall(r"<Size>(\d+)</Size>", body))
        m = re.search(r"<NextContinuationToken>([^<]+)</NextContinuationToken>", body)
        if "<IsTruncated>true</IsTruncated>" not in body or not m:
            return total
        token = m.group(1)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "summary":
        summary(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "s3-bytes":
        print(s3_bytes(sys.argv[2]))
    else:
        sys.exit(__doc__)
