#!/usr/bin/env bash
# libwalship exports the public API and nothing else: every function that
# walship.h declares (plus the error and log functions an embedder needs) is
# exported, nothing of the layers' internals is, and a program built against
# walship.h alone links and runs against the shared library.
#
# Env: WS_LIB (libwalship.so), WS_SRC (the source tree), WS_TEST_TMP.
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail
: "${WS_BIN:=/bin/true}"
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
: "${WS_LIB:?WS_LIB must name libwalship.so}"
: "${WS_SRC:?WS_SRC must name the source tree}"

nm -D --defined-only "$WS_LIB" | awk '$2 ~ /^[TW]$/ {print $3}' | sed 's/@.*//' | sort -u >exported
# Functions walship.h declares (callback typedefs are not functions).
grep -oE '\bws_[a-z0-9_]+\s*\(' "$WS_SRC/include/walship/walship.h" | tr -d '( ' | sort -u >declared
grep -oE '\(\*\s*ws_[a-z0-9_]+\)' "$WS_SRC/include/walship/walship.h" | tr -d '(*) ' | sort -u >typedefs
comm -23 declared typedefs >api
printf '%s\n' ws_strerror ws_errmsg ws_errclear ws_log_set_level ws_log_set_sink >>api
sort -u -o api api

missing=$(comm -23 api exported | tr '\n' ' ')
check "every public function is exported${missing:+ (missing: $missing)}" [ -z "$missing" ]
extra=$(comm -13 api exported | tr '\n' ' ')
check "nothing else is exported${extra:+ (extra: $extra)}" [ -z "$extra" ]
# A host sees walship.h, ws_err.h and ws_log.h (core/CMakeLists.txt installs
# them): each function they declare must link, so each must be exported.
grep -ohE '\bws_[a-z0-9_]+\s*\(' "$WS_SRC/include/walship/walship.h" "$WS_SRC/include/walship/ws_err.h" \
	"$WS_SRC/include/walship/ws_log.h" | tr -d '( ' | sort -u >installed_decls
unlinkable=$(comm -23 <(comm -23 installed_decls typedefs) exported | tr '\n' ' ')
check "the installed headers declare only exported functions${unlinkable:+ (not exported: $unlinkable)}" \
	[ -z "$unlinkable" ]
# (A bound that makes each new public function a decision: 60 at the
# sink's key files.)
check "the export list is small ($(wc -l <exported) symbols)" [ "$(wc -l <exported)" -le 64 ]

cat >embed.c <<'C'
#include <stdio.h>
#include <string.h>
#include "walship.h"
int main(int argc, char **argv)
{
	int err = 0;
	struct ws_sink *s;
	(void)argc;
	s = ws_sink_open(argv[1], &err);
	if (!s || err) {
		fprintf(stderr, "open: %s\n", ws_strerror(err));
		return 1;
	}
	printf("%s %s\n", ws_version(), ws_outcome_name(WS_OUTCOME_STREAMED));
	ws_sink_close(s);
	return strcmp(ws_policy_name(WS_POLICY_SHED), "shed") != 0;
}
C
libdir=$(dirname "$WS_LIB")
# A sanitizer build of the library needs its runtime in the program too.
san=()
undef=$(nm -D --undefined-only "$WS_LIB")
case "$undef" in *__asan_*) san=(-fsanitize=address,undefined) ;; *__tsan_*) san=(-fsanitize=thread) ;; esac
if cc "${san[@]}" -std=c11 -Wall -Werror -I"$WS_SRC/include/walship" embed.c -L"$libdir" -lwalship -o embed 2>cc.err; then
	ok "a program using walship.h builds against libwalship"
	mkdir -p sinkdir
	if LD_LIBRARY_PATH="$libdir" ./embed "file://$ROOT/sinkdir" >out 2>err && grep -q ' streamed$' out; then
		ok "and runs"
	else
		bad "and runs"
	fi
else
	sed 's/^/    /' cc.err | head -20
	bad "a program using walship.h builds against libwalship"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
