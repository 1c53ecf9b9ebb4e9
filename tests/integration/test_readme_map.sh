#!/usr/bin/env bash
# The data-path map of docs/DESIGN.md ("How it works" > "Map", between the
# map:begin and map:end comments) names real code: every `file` exists,
# every `function()` is defined (in the file the same table cell or line
# named last before it, when it named one), every `struct name` is defined,
# and the thread names are the ones the code gives its threads. A function
# renamed or moved without the map following fails here. The same page's
# numbered invariants each name tests that exist, and every "invariant N"
# the code cites is one of them.
#
# Env: WS_SRC (the source tree), WS_TEST_TMP.
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail
: "${WS_BIN:=/bin/true}"
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
: "${WS_SRC:?WS_SRC must name the source tree}"

python3 - "$WS_SRC" >results <<'PY'
import os, re, sys

src = sys.argv[1]
design = open(os.path.join(src, "docs", "DESIGN.md"), encoding="utf-8").read()
m = re.search(r"<!-- map:begin.*?-->(.*?)<!-- map:end -->", design, re.S)
if not m:
    print("BAD docs/DESIGN.md has no map (map:begin ... map:end)")
    sys.exit(0)
text = m.group(1)

sources = {}
for layer in ("base", "include", "core", "io", "net", "store", "tools"):
    for root, _, files in os.walk(os.path.join(src, layer)):
        for f in files:
            if f.endswith((".c", ".h")):
                path = os.path.join(root, f)
                sources[os.path.relpath(path, src)] = open(path, encoding="utf-8").read()

def defined_in(fn, body):
    # A definition: a line at column 0 (type, or the name itself) naming
    # fn(, whose parameter list is followed by '{', not ';'.
    for d in re.finditer(r"^[A-Za-z_][^\n;]*?\b" + re.escape(fn) + r"\(", body, re.M):
        rest = body[d.end():]
        brace, semi = rest.find("{"), rest.find(";")
        if brace >= 0 and (semi < 0 or brace < semi):
            return True
    return False

counts = {"file": 0, "function": 0, "struct": 0, "thread": 0}
bad = 0
for line in text.splitlines():
    cells = line.strip().strip("|").split("|") if line.lstrip().startswith("|") else [line]
    for cell in cells:
        current = None
        for tok in re.findall(r"`([^`]+)`", cell):
            if re.fullmatch(r"(base|include|core|io|net|store|tools|bench|tests)/[\w./-]+\.[ch]", tok):
                counts["file"] += 1
                if tok not in sources:
                    print(f"BAD file {tok} does not exist"); bad += 1
                current = tok
            elif re.fullmatch(r"[A-Za-z_]\w*\(\)", tok):
                fn = tok[:-2]
                counts["function"] += 1
                where = [current] if current in sources else list(sources)
                if not any(defined_in(fn, sources[p]) for p in where):
                    print(f"BAD function {fn}() is not defined in {current or 'the sources'}"); bad += 1
            elif re.fullmatch(r"struct \w+", tok):
                name = tok.split()[1]
                counts["struct"] += 1
                if not any(re.search(r"^struct " + name + r" \{", b, re.M) for b in sources.values()):
                    print(f"BAD {tok} is not defined"); bad += 1
            elif re.fullmatch(r"ws-[a-z]+(-N)?", tok):
                counts["thread"] += 1
                lit = '"' + tok.replace("-N", "-%u") + '"'
                if not any(lit in b for b in sources.values()):
                    print(f"BAD thread name {tok} ({lit}) is not in the sources"); bad += 1
for k, v in counts.items():
    print(f"COUNT {k} {v}")

# The numbered invariants: each names tests that exist, and every
# "invariant N" the code cites is one of them.
inv = re.search(r"^## Invariants\n(.*?)^## ", design, re.S | re.M)
items = re.split(r"^(\d+)\. ", inv.group(1), flags=re.M)[1:] if inv else []
numbers = [int(n) for n in items[0::2]]
print(f"COUNT invariant {len(numbers)}")
if numbers != list(range(1, len(numbers) + 1)):
    print(f"BAD invariants are not numbered 1..{len(numbers)}: {numbers}"); bad += 1
tests_src = ""
for root, _, files in os.walk(os.path.join(src, "tests")):
    for f in files:
        if f.endswith((".c", ".sh", ".py")):
            tests_src += open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
def test_exists(name):
    for prefix, folder in (("integ_", "integration"), ("hostile_", "hostile")):
        if name.startswith(prefix):
            return os.path.exists(os.path.join(src, "tests", folder, name[len(prefix):] + ".sh"))
    if name == "torture_smoke":
        return "torture_smoke" in open(os.path.join(src, "tests", "CMakeLists.txt")).read()
    return re.search(r"^static void " + re.escape(name) + r"\(", tests_src, re.M) is not None
for n, body in zip(numbers, items[1::2]):
    named = re.findall(r"`((?:test|integ|hostile)_\w+|torture_smoke)`", body.split("Tests:", 1)[-1]) if "Tests:" in body else []
    if not named:
        print(f"BAD invariant {n} names no test"); bad += 1
    for t in named:
        if not test_exists(t):
            print(f"BAD invariant {n} names {t}, which is no test"); bad += 1
cited = 0
for rel, body in list(sources.items()) + [("tests", tests_src)]:
    for c in re.finditer(r"\binvariants? (\d+(?:(?:, | and )\d+)*)", body):
        for n in re.findall(r"\d+", c.group(1)):
            cited += 1
            if int(n) not in numbers:
                print(f"BAD {rel} cites invariant {n}, which docs/DESIGN.md does not number"); bad += 1
print(f"COUNT citation {cited}")
print(f"DONE {bad}")
PY

while read -r kind rest; do
	case "$kind" in
	BAD) bad "map: $rest" ;;
	COUNT) read -r what n <<<"$rest"; printf -v "n_$what" '%s' "$n" ;;
	DONE) check "map: every name checked is real" [ "$rest" = 0 ] ;;
	esac
done <results
check "the map names files (${n_file:-0})" [ "${n_file:-0}" -ge 10 ]
check "the map names functions (${n_function:-0})" [ "${n_function:-0}" -ge 40 ]
check "the map names structs (${n_struct:-0})" [ "${n_struct:-0}" -ge 2 ]
check "the map names both threads (${n_thread:-0})" [ "${n_thread:-0}" -ge 2 ]
check "docs/DESIGN.md numbers its invariants (${n_invariant:-0})" [ "${n_invariant:-0}" -ge 10 ]
check "the code cites them (${n_citation:-0} citations checked)" [ "${n_citation:-0}" -ge 5 ]

# docs/CLI.md names every command and every option the commands' --help
# texts name (the help texts come from the binary, so an option added
# without its reference fails here).
if [ "$WS_BIN" != /bin/true ]; then
	cli="$WS_SRC/docs/CLI.md"
	cmds=$("$WS_BIN" help | awk '/^commands:/ { on = 1; next } on && NF == 0 { exit } on { print $1 }')
	check "walship help lists commands ($(echo "$cmds" | wc -w))" [ "$(echo "$cmds" | wc -w)" -ge 8 ]
	missing=""
	for c in $cmds; do
		grep -q "walship $c" "$cli" || missing="$missing $c"
		for o in $("$WS_BIN" "$c" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
			grep -qe "$o" "$cli" || missing="$missing $c:$o"
		done
	done
	check "docs/CLI.md names every command and option of the --help texts (missing:${missing:- none})" \
		[ -z "$missing" ]
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
