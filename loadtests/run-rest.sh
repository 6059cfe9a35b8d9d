#!/usr/bin/env bash
# The REST edge against gRPC, in one run on one server: CreateMessages in
# batches of 100 (one client, then 8, each on its own session) over gRPC
# (`ingest`) and over Honcho's REST route (`rest`), then SearchMessages
# against a 20,000-message corpus once its vectors are synced, over both
# edges in turn, twice (2 clients). Embedded, then
# Postgres; the test hashing embedder configured (semantic search on,
# embedding off the write path), derivation tasks written with the messages.
#
#   loadtests/run-rest.sh [batches]
#
# RONCHO_BENCH_ROLES=ingest,recall,dialectic,reconciler runs the server with
# those roles instead of all (no deriver on the same cores during the run).
set -euo pipefail
cd "$(dirname "$0")/.."
port=50981
rest_port=50982
source loadtests/common.sh
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest
batches=${1:-300}
export RONCHO_EMBEDDING_PROVIDER=test-hashing RONCHO_EMBEDDING_DIMENSIONS=384

run() { # label serve-args...
  local label=$1 grpc=http://127.0.0.1:$port rest=http://127.0.0.1:$rest_port
  shift
  start_server ${RONCHO_BENCH_ROLES:+--roles "$RONCHO_BENCH_ROLES"} --rest-listen "127.0.0.1:$rest_port" "$@"
  for clients in 1 8; do
    "$loadtest" --target "$grpc" --label "$label, gRPC, $clients client(s)" ingest \
      --batches "$batches" --concurrency "$clients" --lists 0
    "$loadtest" --target "$rest" --label "$label, REST, $clients client(s)" rest \
      --batches "$batches" --concurrency "$clients"
  done
  "$loadtest" --target "$grpc" --label "$label" search-ingest --messages 20000 >/dev/null
  # Searches cost more as vectors sync: both edges search the synced corpus.
  until "$roncho" status --listen "127.0.0.1:$port" "$@" 2>/dev/null | grep -Eq "^message vectors +ok +[0-9]+ synced, 0 pending"; do
    sleep 2
  done
  for edge in gRPC REST gRPC REST; do
    if [ $edge = gRPC ]; then
      "$loadtest" --target "$grpc" --label "$label, gRPC" search --queries 2000
    else
      "$loadtest" --target "$rest" --label "$label, REST" rest --batches 0 --queries 2000 --concurrency 2
    fi
  done
  stop_server
}

echo "# $(date -u +%F) $(nproc) cores; $batches batches of 100 per client count"
run embedded --data-dir "$work/data"
run postgres "$(postgres_args)"
