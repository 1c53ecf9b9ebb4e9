#!/usr/bin/env bash
# The longest functions of the library's C sources, for keeping them short
# (issue 13 asks for "longest functions before and after").
#   tools/funclen.sh [-n N] [REV]
# prints the N (15) longest functions in core/ io/ net/ store/ as
# "lines  file:line  name", a function's lines counted from the first line
# of its definition to its closing brace. With REV (a commit), measures the
# sources as that commit has them (git show), leaving the tree alone.
# The house style opens and closes every function body at column 0, so awk
# suffices: no parser, no package to install.
set -euo pipefail
n=15
if [ "${1:-}" = "-n" ]; then n=$2; shift 2; fi
rev=${1:-}
cd "$(dirname "$0")/.."
dirs=(core io net store)

if [ -n "$rev" ]; then
  git rev-parse --verify -q "$rev^{commit}" >/dev/null || { echo "funclen: no commit $rev" >&2; exit 2; }
  files=$(git ls-tree -r --name-only "$rev" -- "${dirs[@]}" | grep '\.c$')
else
  files=$(git ls-files -- "${dirs[@]}" | grep '\.c$')
fi

for f in $files; do
  if [ -n "$rev" ]; then git show "$rev:$f"; else cat "$f"; fi |
  awk -v file="$f" '
    # A definition starts at column 0 with a line that has "(" and is not a
    # comment, a preprocessor line or a declaration ending in ";".
    # Labels ("fail:") also sit at column 0: inside a body, only "}" counts.
    body && /^\}/ {
      gsub(/__attribute__\(\([^)]*\)\)/, "", name)
      sub(/\(.*/, "", name); k = split(name, w, /[ *]+/)
      printf "%d\t%s:%d\t%s\n", NR - start + 1, file, start, w[k]
      body = 0; start = 0; next
    }
    body { next }
    /^[A-Za-z_]/ && /\(/ && !/;[[:space:]]*$/ { start = NR; name = $0; next }
    /^[A-Za-z_]/ { start = 0 }
    /^\{/ && start { body = 1 }'
done | sort -t$'\t' -k1,1nr -k2,2 | head -n "$n" | awk -F'\t' '{ printf "%5d  %-32s %s\n", $1, $2, $3 }'
