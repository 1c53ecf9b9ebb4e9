#!/usr/bin/env bash
# Install walship's build and test dependencies from Debian's archive.
# Idempotent; skipped entirely when WS_SKIP_INSTALL=1.
set -euo pipefail
[ "${WS_SKIP_INSTALL:-0}" = "1" ] && exit 0

PKGS=(
  build-essential cmake pkg-config
  liburing-dev libcurl4-openssl-dev libssl-dev libxxhash-dev
  libsqlite3-dev sqlite3 libinih-dev libjansson-dev libexpat1-dev
  libcmocka-dev libbenchmark-dev python3 curl
  ceph-mon ceph-osd radosgw
)
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
