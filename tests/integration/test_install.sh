#!/usr/bin/env bash
# `cmake --install` of a build tree into a scratch prefix gives a host what
# it needs: the CLI, libwalship.so with its soname exporting the public API
# only, walship.h, walship.pc and the walship CMake package. The embedding
# example (examples/host.c) is built against that prefix twice, with
# find_package(walship) (examples/CMakeLists.txt) and with pkg-config
# (examples/Makefile); each build runs against a file:// sink of its own,
# and every tenant it wrote is restored with the prefix's walship CLI and
# must equal its source database.
#
# Env: WS_BUILD (the build tree to install), WS_SRC (the source tree),
#      WS_TEST_TMP. tools/test.sh runs it on build-ci ("install").
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail
: "${WS_BIN:=/bin/true}"
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
: "${WS_BUILD:?WS_BUILD must name the build tree to install}"
: "${WS_SRC:?WS_SRC must name the source tree}"
WS_BUILD=$(readlink -f "$WS_BUILD")
WS_SRC=$(readlink -f "$WS_SRC")
PREFIX="$ROOT/prefix"
TENANTS=3

# run_logged LOG CMD...: CMD's output to LOG, shown on failure.
run_logged() {
	local log=$1
	shift
	if "$@" >"$log" 2>&1; then return 0; fi
	head -n 40 "$log" | sed 's/^/    /'
	return 1
}

check "cmake --install into a scratch prefix" run_logged install.log cmake --install "$WS_BUILD" --prefix "$PREFIX"
WALSHIP="$PREFIX/bin/walship"
check "the walship CLI is installed and runs" run_logged version.log "$WALSHIP" version
so=$(find "$PREFIX" -name 'libwalship.so' | head -n1)
libdir=$(dirname "${so:-$PREFIX/lib/x}")
check "libwalship.so is installed (${so#"$PREFIX"/})" [ -n "$so" ]
soname=$(readelf -d "$libdir/libwalship.so" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
check "its soname is libwalship.so.0 ($soname), linked from the versioned file" \
	bash -c '[ "$1" = libwalship.so.0 ] && [ -L "$2/libwalship.so.0" ] && [ -f "$(readlink -f "$2/libwalship.so")" ] &&
		case "$(readlink -f "$2/libwalship.so")" in *libwalship.so.0.*) true ;; *) false ;; esac' _ "$soname" "$libdir"
check "walship.h and the headers it includes are installed" \
	test -f "$PREFIX/include/walship/walship.h" -a -f "$PREFIX/include/walship/ws_err.h" -a -f "$PREFIX/include/walship/ws_log.h"
check "no static library or internal header is installed" \
	bash -c '[ -z "$(find "$1" -name "*.a" -o -name "ws_store.h" -o -name "ws_wal.h")" ]' _ "$PREFIX"
check "the benchmarks are not installed" bash -c '[ ! -e "$1/bin/walship-bench" ]' _ "$PREFIX"

# The installed library exports the public API and nothing else (the same
# check as the build tree's, tests/integration/test_exports.sh).
if WS_LIB="$libdir/libwalship.so" run_logged exports.log bash "$WS_SRC/tests/integration/test_exports.sh"; then
	ok "nm -D of the installed library: the public API only ($(grep -c '^ok' exports.log) checks)"
else
	bad "nm -D of the installed library: the public API only"
fi

# A sanitizer build of the library needs its runtime in the host too.
san=""
case "$(nm -D --undefined-only "$libdir/libwalship.so")" in
*__asan_*) san="-fsanitize=address,undefined" ;;
*__tsan_*) san="-fsanitize=thread" ;;
esac

export PKG_CONFIG_PATH="$libdir/pkgconfig"
version=$(sed -n 's/^project(walship VERSION \([0-9.]*\).*/\1/p' "$WS_SRC/CMakeLists.txt")
check "pkg-config finds walship $version in the prefix" [ "$(pkg-config --modversion walship)" = "$version" ]
check "pkg-config --cflags --libs walship name the prefix" \
	bash -c '[ "$(pkg-config --cflags walship | xargs)" = "-I$1/include/walship" ] &&
		[ "$(pkg-config --libs walship | xargs)" = "-L$2 -lwalship" ]' _ "$PREFIX" "$libdir"
cat >only_header.c <<'C'
#include <walship.h>
int main(void) { return ws_strerror(WS_ECONFIG)[0] == '\0'; }
C
# shellcheck disable=SC2046,SC2086
check "walship.h alone compiles and links (-std=c11 -Wall -Werror, pkg-config flags)" \
	run_logged only_header.log cc $san -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags walship) only_header.c \
	-o only_header $(pkg-config --libs walship) -Wl,-rpath,"$libdir"

# A C++ host: the installed headers give the library's functions C linkage
# (ws_err.h and ws_log.h were outside walship.h's extern "C").
cat >cxx_host.cc <<'CXX'
#include <walship.h>
#include <ws_log.h>
int main() { ws_log_set_level(WS_LOG_WARN); return ws_strerror(WS_ECONFIG)[0] == '\0' || !ws_version(); }
CXX
if command -v c++ >/dev/null; then
	# shellcheck disable=SC2046,SC2086
	check "a C++ host includes walship.h and ws_log.h, links and runs" \
		run_logged cxx_host.log bash -c 'c++ $1 -std=c++17 -Wall -Werror $(pkg-config --cflags walship) cxx_host.cc \
			-o cxx_host $(pkg-config --libs walship) -Wl,-rpath,"$2" && ./cxx_host' _ "$san" "$libdir"
fi

# Build the example both ways.
check "examples/: cmake with find_package(walship)" \
	run_logged cmake-host.log bash -c 'cmake -S "$1/examples" -B host-cmake -DCMAKE_PREFIX_PATH="$2" \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="$3 -Werror" -DCMAKE_EXE_LINKER_FLAGS="$3" &&
		cmake --build host-cmake' _ "$WS_SRC" "$PREFIX" "$san"
cp -r "$WS_SRC/examples" host-make
rm -f host-make/host
check "examples/: make with pkg-config" \
	run_logged make-host.log make -C host-make CFLAGS="-O1 -g -Werror $san" LDFLAGS="$san"
check "the find_package build links the installed library" \
	bash -c 'ldd host-cmake/host | grep -q "libwalship.so.0 => $1/"' _ "$libdir"
check "the pkg-config build links the installed library" \
	bash -c 'ldd host-make/host | grep -q "libwalship.so.0 => $1/"' _ "$libdir"

# Run each against a file:// sink; restore every tenant with the installed CLI.
for how in cmake make; do
	host="host-$how/host"
	if [ ! -x "$host" ]; then
		bad "$how: host was not built"
		continue
	fi
	mkdir -p "sink-$how" "work-$how"
	set +e
	"$host" "file://$ROOT/sink-$how" "$ROOT/work-$how" "$TENANTS" >"run-$how.log" 2>&1
	hrc=$?
	set -e
	no_sanitizer_report "run-$how.log" "host ($how)"
	if [ "$hrc" = 0 ] && grep -q '^host: outcomes: .* 0 failed tails$' "run-$how.log"; then
		ok "$how: host ran its tenants, read outcomes and metrics, and stopped (exit 0)"
	else
		sed 's/^/    /' "run-$how.log" | head -n 30
		bad "$how: host ran its tenants, read outcomes and metrics, and stopped (exit $hrc)"
	fi
	check "$how: host printed per-tenant and per-shard metrics" \
		bash -c '[ "$(grep -c "^host: tenant tenant-[0-9]* *shard" "$1")" = "$2" ] && grep -q "^host: shard 1 " "$1" &&
			grep -q "^host: Prometheus metrics: [1-9]" "$1"' _ "run-$how.log" "$TENANTS"
	# The event channel: every tenant's Hydrated, then each transaction's
	# Changed pages and its Progressed (5 rounds, one transaction a tenant each);
	# a marker (a Progressed at a tenant's unchanged tx_id, docs/EVENTS.md
	# "Markers") is printed with "(a marker: nothing newer)" and not counted.
	check "$how: host printed each tenant's Hydrated and every commit's Changed and Progressed events" \
		bash -c '[ "$(grep -c "^host: event hydrated tenant-[0-9]* tx 1:[0-9]*, [1-9][0-9]* pages of 4096 bytes$" "$1")" = "$2" ] &&
			[ "$(grep -c "^host: event progressed tenant-[0-9]* worker [01] tx 1:[0-9]*$" "$1")" = "$(($2 * 5))" ] &&
			[ "$(grep -c "^host: event changed tenant-[0-9]* [1-9][0-9]* pages from frame [0-9]*, with the commit$" "$1")" -ge "$(($2 * 5))" ] &&
			! grep -q "^host: event faulted" "$1" &&
			grep -q "^host: events: query [0-9]* saw 5 commits of each of $2 tenants, 0 faulted$" "$1"' _ "run-$how.log" "$TENANTS"
	for ((i = 0; i < TENANTS; i++)); do
		t="tenant-$i"
		set +e
		"$WALSHIP" restore --sink "file://$ROOT/sink-$how" --tenant "$t" -o "$ROOT/restored-$how-$t.db" \
			>"restore-$how-$t.log" 2>&1
		r=$?
		set -e
		no_sanitizer_report "restore-$how-$t.log" "walship restore ($how $t)"
		sqlite3 "work-$how/$t.db" .dump >"src-$how-$t.sql" 2>/dev/null || true
		sqlite3 "restored-$how-$t.db" .dump >"dst-$how-$t.sql" 2>/dev/null || true
		rows=$(sqlite3 "work-$how/$t.db" 'SELECT count(*) FROM events' 2>/dev/null || echo 0)
		if [ "$r" = 0 ] && [ "$rows" -gt 0 ] && cmp -s "src-$how-$t.sql" "dst-$how-$t.sql"; then
			ok "$how: $t restored by the installed walship equals its source ($rows rows)"
		else
			sed 's/^/    /' "restore-$how-$t.log" | head -n 10
			bad "$how: $t restored by the installed walship equals its source (restore exit $r, $rows rows)"
		fi
	done
	set +e
	"$WALSHIP" verify --sink "file://$ROOT/sink-$how" >"verify-$how.log" 2>&1
	r=$?
	set -e
	check "$how: walship verify of the host's sink passes" [ "$r" = 0 ]
done

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
