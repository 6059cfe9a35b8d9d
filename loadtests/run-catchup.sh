#!/usr/bin/env bash
# The reconciler's catch-up after a write burst, on Postgres: one Rust
# client writes [batches] batches of 100 with no reconciler running (the API
# roles only), then a reconciler process alone syncs the backlog (the test
# hashing embedder, vectors in Postgres, words indexed by the text indexer
# and the reconciler). Reports how long the catch-up took, the CPU Postgres
# spent on it (this machine's `postgres` processes, from /proc) and the WAL
# it wrote. RONCHO_BIN compares another build (ADR 0012 was measured so).
#
#   loadtests/run-catchup.sh [batches]
set -euo pipefail
cd "$(dirname "$0")/.."
port=50961
source loadtests/common.sh
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest
batches=${1:-600}
export RONCHO_EMBEDDING_PROVIDER=test-hashing RONCHO_EMBEDDING_DIMENSIONS=384
db=$(postgres_args)
dburl=${server_url%/*}/$database
start_server --roles ingest,recall --rest-listen off "$db"
"$loadtest" --target "http://127.0.0.1:$port" --label "write (no reconciler)" ingest \
  --batches "$batches" --concurrency 1 --lists 0
stop_server

postgres_ticks() {
  local sum=0 each
  for each in $(pgrep -u postgres); do
    sum=$((sum + $(awk '{print $14 + $15}' "/proc/$each/stat" 2>/dev/null || echo 0)))
  done
  echo "$sum"
}
ticks=$(getconf CLK_TCK)
wal0=$(psql "$dburl" -Atc "SELECT pg_current_wal_lsn()")
cpu0=$(postgres_ticks)
start=$(date +%s.%N)
start_server --roles reconciler --rest-listen off "$db"
until "$roncho" status --listen "127.0.0.1:$port" "$db" 2>/dev/null | grep -Eq "^message vectors +ok +[0-9]+ synced, 0 pending"; do
  sleep 0.1
done
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
cpu1=$(postgres_ticks)
wal=$(psql "$dburl" -Atc "SELECT round(pg_wal_lsn_diff(pg_current_wal_lsn(), '$wal0') / 1e6, 1)")
stop_server
printf 'catch-up of %d messages: %.2f s, Postgres CPU %.2f s, WAL %s MB\n' \
  $((batches * 100)) "$elapsed" "$(echo "($cpu1 - $cpu0) / $ticks" | bc -l)" "$wal"
