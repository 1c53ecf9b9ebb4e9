#!/usr/bin/env bash
# The main job on the embedded default: replicate a SQLite database that is
# being written to into a local directory sink, then restore it and show that
# the restored database matches the source.
#
#   bash tools/demo.sh            (installs what is missing, builds, runs)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh --core

echo "== build"
cmake -S . -B build-demo -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWS_BUILD_TESTS=OFF -DWS_BUILD_BENCH=OFF >/dev/null
cmake --build build-demo -j"$(nproc)" --target walship >/dev/null
W=$PWD/build-demo/tools/walship

DIR=${WS_DEMO_DIR:-/tmp/walship-demo}
rm -rf "$DIR"
mkdir -p "$DIR"
DB=$DIR/orders.db
SINK=file://$DIR/sink

echo "== create $DB (WAL mode)"
sqlite3 "$DB" "PRAGMA journal_mode=WAL;
  CREATE TABLE orders(id INTEGER PRIMARY KEY, customer TEXT, amount INTEGER, note BLOB);" >/dev/null

echo "== replicate to $SINK while a writer commits transactions"
"$W" replicate --sink "$SINK" --interval-ms 200 "$DB" &
REPL=$!
trap 'kill $REPL 2>/dev/null || true' EXIT

for i in $(seq 1 40); do
  sqlite3 -cmd ".timeout 5000" "$DB" "BEGIN;
    INSERT INTO orders(customer, amount, note)
      SELECT 'customer-' || abs(random() % 1000), abs(random() % 100000), randomblob(abs(random() % 2000))
      FROM generate_series(1, 50);
    UPDATE orders SET amount = amount + 1 WHERE id % 17 = $((i % 17));
    DELETE FROM orders WHERE id % 101 = $((i % 101));
    COMMIT;" >/dev/null
  case $((i % 10)) in
    3) sqlite3 -cmd ".timeout 5000" "$DB" "PRAGMA wal_checkpoint(PASSIVE);" >/dev/null ;;
    7) sqlite3 -cmd ".timeout 300" "$DB" "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null ;;
  esac
  sleep 0.05
done

echo "== stop the replicator (SIGTERM: it ships what is committed, then exits)"
kill -TERM $REPL
wait $REPL
trap - EXIT

echo "== what the sink holds"
"$W" ls --sink "$SINK"
"$W" verify --sink "$SINK"

echo "== restore"
"$W" restore --sink "$SINK" --tenant orders -o "$DIR/restored.db"

echo "== compare"
sqlite3 "$DB" .dump > "$DIR/source.sql"
sqlite3 "$DIR/restored.db" .dump > "$DIR/restored.sql"
if cmp -s "$DIR/source.sql" "$DIR/restored.sql"; then
  echo "MATCH: $(sqlite3 "$DIR/restored.db" 'SELECT count(*) FROM orders') rows, integrity_check=$(sqlite3 "$DIR/restored.db" 'PRAGMA integrity_check')"
else
  echo "MISMATCH: see diff $DIR/source.sql $DIR/restored.sql" >&2
  exit 1
fi
