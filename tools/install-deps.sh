#!/usr/bin/env bash
# Install walship's build and test dependencies from Debian's archive.
# Idempotent; skipped entirely when WS_SKIP_INSTALL=1. --core: only what
# building and running walship needs (no test servers).
set -euo pipefail
[ "${WS_SKIP_INSTALL:-0}" = "1" ] && exit 0

# Build and run: what the library, the CLI and the demo need (the CLI: libinih
# for its INI config, Jansson for --json, libmicrohttpd for --metrics-addr;
# libzstd: the codec of sealed objects).
PKGS=(
  build-essential cmake pkg-config
  liburing-dev libcurl4-openssl-dev libssl-dev libxxhash-dev
  libsqlite3-dev sqlite3 libinih-dev libjansson-dev libexpat1-dev libmicrohttpd-dev
  libzstd-dev
)
# Tests and benchmarks also need these (radosgw: the real S3 server of the
# S3 tests; curl: the metrics test's scrapes; clang-14 and its libFuzzer
# runtime, libclang-rt-14-dev: the fuzz targets of tests/fuzz; haproxy: the
# throttling store of tests/s3/throttle.sh; gnuplot-nox: walship-bench's
# plots; faketime: a writer whose clock is behind); `install-deps.sh --core`
# skips them.
if [ "${1:-}" != "--core" ]; then
  PKGS+=(libcmocka-dev libbenchmark-dev python3 curl ceph-mon ceph-osd radosgw clang-14 libclang-rt-14-dev
         haproxy gnuplot-nox faketime)
  # npm: bench/run_seal_bench.sh installs Litestream (its npm package) with it;
  # a Node.js that brings its own npm keeps it.
  command -v npm >/dev/null || PKGS+=(npm)
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# CI always refreshes the package lists and asks apt for the whole set.
[ "${CI:-}" = "true" ] && missing=("${PKGS[@]}")
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "walship: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
