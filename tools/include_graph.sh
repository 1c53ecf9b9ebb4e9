#!/usr/bin/env bash
# The library's file dependency graph, from its #include lines, and a check
# that it has no cycle.
#   tools/include_graph.sh [--root DIR] [--print]
#   tools/include_graph.sh --self-test
# A library source file (a .c under base/ io/ net/ store/ core/) depends on
# the .c files that implement the headers it includes, directly or through
# other headers (what a file can see, it may call). A header is implemented
# by the .c files of the same stem in those folders (chain.h: chain.c;
# ws_wal.h: wal.c, the ws_ prefix dropped), or by the files the map below
# names. Files that implement one header are one module (a format split
# for an instruction set, an interface and its backends): no edge between
# them counts. A header no file implements (walship.h, the public API; a header of
# definitions only, core/core_internal.h) adds no edge.
# Prints one line per cycle ("cycle: a.c -> b.c -> a.c") and exits 1 when
# there is one; else "no cycle: N files, M edges" and exit 0. --print lists
# each file's dependencies first. --self-test runs the check on two small
# trees of its own, one with a cycle, and fails unless it finds exactly that.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$here
print=0
self_test=0
while [ $# -gt 0 ]; do
  case $1 in
    --root) root=$2; shift 2 ;;
    --print) print=1; shift ;;
    --self-test) self_test=1; shift ;;
    *) echo "include_graph: unknown argument $1" >&2; exit 2 ;;
  esac
done

graph() { # graph ROOT PRINT
  python3 - "$1" "$2" <<'PY'
import os, re, sys

root, show = sys.argv[1], sys.argv[2] == "1"
layers = ("base", "io", "net", "store", "core")
# Headers whose implementation is not (only) the file of the same stem.
impl_map = {
    "ws_logging.h": ["log.c"],
    "ws_fail.h": ["err.c"],
    "ws_assert.h": ["err.c"],
    "hash_impl.h": ["hash.c", "hash_avx2.c"],
    "xxh_body.h": [],
    "ws_wal.h": ["wal.c", "wal_simd.c"],
    "ckpt_internal.h": ["ckpt.c", "ckpt_index.c", "ckpt_records.c", "ckpt_json.c"],
    "ws_ckpt.h": ["ckpt.c", "ckpt_index.c", "ckpt_records.c", "ckpt_json.c"],
    # The store's interface: the dispatcher and the backends behind it.
    "ws_store.h": ["store.c", "store_file.c", "file_open.c", "file_read.c", "file_delete.c",
                   "store_s3.c", "s3_ops.c", "s3_list.c", "s3_url.c"],
    "s3_internal.h": ["store_s3.c", "s3_ops.c", "s3_list.c", "s3_url.c"],
    "file_internal.h": ["store_file.c", "file_open.c", "file_read.c", "file_delete.c"],
    "http_internal.h": ["http.c"],
    # The tail: one stream, in the files of its steps.
    "stream_internal.h": ["stream.c", "stream_txn.c", "stream_wal.c", "stream_scan.c", "stream_manifest.c",
                          "stream_steps.c"],
    "ws_stream.h": ["stream.c", "stream_txn.c", "stream_wal.c", "stream_scan.c", "stream_manifest.c",
                    "stream_steps.c"],
}
inc_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

sources, headers = {}, {}
for layer in layers + ("include",):
    for d, _, files in os.walk(os.path.join(root, layer)):
        for f in files:
            p = os.path.join(d, f)
            if f.endswith(".c") and layer != "include":
                sources[os.path.relpath(p, root)] = p
            elif f.endswith(".h"):
                headers.setdefault(f, p)

def includes(path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        return [os.path.basename(h) for h in inc_re.findall(fh.read())]

by_stem = {}
for rel in sources:
    by_stem.setdefault(os.path.basename(rel)[:-2], []).append(rel)

def implementers(h):
    if h in impl_map:
        names = impl_map[h]
        return [r for r in sources if os.path.basename(r) in names]
    stem = h[:-2]
    return by_stem.get(stem) or (by_stem.get(stem[3:], []) if stem.startswith("ws_") else [])

def seen_headers(rel):
    out, todo = set(), includes(sources[rel])
    while todo:
        h = todo.pop()
        if h in out:
            continue
        out.add(h)
        if h in headers:
            todo.extend(includes(headers[h]))
    return out

all_headers = set(headers) | set(impl_map)
module = {rel: {rel} for rel in sources}
for h in all_headers:
    imp = implementers(h)
    for r in imp:
        module[r].update(imp)

deps = {}
for rel in sorted(sources):
    d = set()
    for h in seen_headers(rel):
        d.update(implementers(h))
    deps[rel] = sorted(d - module[rel])

if show:
    for rel in sorted(deps):
        print("%s: %s" % (rel, " ".join(deps[rel]) or "-"))

# Depth-first search; an edge back to a file on the stack closes a cycle.
cycles, state = [], {}
def visit(n, stack):
    state[n] = 1
    stack.append(n)
    for m in deps[n]:
        if state.get(m) == 1:
            cycles.append(stack[stack.index(m):] + [m])
        elif m not in state:
            visit(m, stack)
    stack.pop()
    state[n] = 2

sys.setrecursionlimit(10000)
for n in sorted(deps):
    if n not in state:
        visit(n, [])
for c in cycles:
    print("cycle: " + " -> ".join(c))
if cycles:
    sys.exit(1)
print("no cycle: %d files, %d edges" % (len(deps), sum(len(v) for v in deps.values())))
PY
}

if [ "$self_test" = 1 ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/base" "$tmp/store" "$tmp/core"
  # base <- store <- core, and core/b.c -> core/c.c -> core/b.c through
  # c.h, which reaches b.h only through another header (d.h).
  printf '#include "ws_fail.h"\nint fail(void) { return 0; }\n' >"$tmp/base/err.c"
  printf 'int fail(void);\n' >"$tmp/base/ws_fail.h"
  printf '#include "ws_fail.h"\n' >"$tmp/store/ws_kv.h"
  printf '#include "ws_kv.h"\nint kv(void) { return fail(); }\n' >"$tmp/store/kv.c"
  printf '#include "ws_kv.h"\n#include "b.h"\nint a(void) { return kv() + b(); }\n' >"$tmp/core/a.c"
  printf 'int b(void);\n' >"$tmp/core/b.h"
  printf '#include "c.h"\nint b(void) { return c(); }\n' >"$tmp/core/b.c"
  printf '#include "d.h"\nint c(void);\n' >"$tmp/core/c.h"
  printf '#include "b.h"\n' >"$tmp/core/d.h"
  printf '#include "d.h"\nint c(void) { return b(); }\n' >"$tmp/core/c.c"
  out=$(graph "$tmp" 0) && { echo "include_graph self-test: the cycle was not found"; exit 1; }
  echo "$out"
  case $out in
    *"cycle: core/b.c -> core/c.c -> core/b.c"*) ;;
    *) echo "include_graph self-test: expected the cycle core/b.c -> core/c.c -> core/b.c"; exit 1 ;;
  esac
  # Without the edge back (c.c no longer sees b.h), no cycle, every layer's edge found.
  printf '#include "ws_kv.h"\nint c(void) { return kv(); }\n' >"$tmp/core/c.c"
  printf 'int c(void);\n' >"$tmp/core/c.h"
  out=$(graph "$tmp" 1) || { echo "$out"; echo "include_graph self-test: a tree without a cycle failed"; exit 1; }
  echo "$out"
  for want in "core/a.c: base/err.c core/b.c store/kv.c" "core/b.c: core/c.c" "store/kv.c: base/err.c" \
      "no cycle: 5 files, 7 edges"; do
    grep -qxF "$want" <<<"$out" || { echo "include_graph self-test: expected \"$want\""; exit 1; }
  done
  echo "include_graph self-test: ok"
  exit 0
fi

graph "$root" "$print"
