#!/usr/bin/env bash
# What counting each message's terms per workspace costs the reconciler
# (ADR 0007, amendment) in the distributed mode: an ingest process writes N
# messages (generated zipf corpus, one workspace) into a fresh Postgres
# database, then a reconciler process is started and timed until every
# vector is in Qdrant. Alternated, each round on a fresh database and
# collection:
#   counted    a collection as roncho makes it now: the reconciler counts
#              each synced message's terms in `workspace_terms`;
#   uncounted  the same collection switched to Qdrant's `Idf` modifier before
#              the reconciler starts, as a roncho before the counts made it:
#              nothing is counted.
# Vectors come from the test hashing embedder at 384 dimensions, so the time
# is the sync's own (rows, upserts, marks), not a model's.
#
#   loadtests/run-sync.sh [messages] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
# Below Linux's ephemeral range (32768+), where outgoing connections could take it.
port=21300
source loadtests/common.sh
messages=${1:-100000}
rounds=${2:-2}
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest
export RONCHO_EMBEDDING_PROVIDER=test-hashing RONCHO_EMBEDDING_DIMENSIONS=384
export RONCHO_NATS_URL=${RONCHO_TEST_NATS_URL:-nats://127.0.0.1:4222}
echo "# $(date -u +%F) $(nproc) cores; $messages messages (zipf); Postgres + Qdrant, separate processes"

run() { # counted|uncounted
  local layout=$1 db_args vector_args started status
  export RONCHO_NATS_PREFIX=sync_$$_$RANDOM
  qdrant_args >/dev/null
  vector_args=--qdrant-url=$qdrant_url
  db_args=$(postgres_args)
  start_process "$port" --roles ingest "$db_args" "$vector_args"
  if [ "$layout" = uncounted ]; then
    curl -sf -X PATCH "$qdrant_http_url/collections/$RONCHO_QDRANT_COLLECTION" -H 'Content-Type: application/json' \
      -d '{"sparse_vectors":{"text":{"modifier":"idf"}}}' >/dev/null
  fi
  "$loadtest" --target "http://127.0.0.1:$port" --label "write $messages" search-ingest \
    --messages "$messages" --corpus zipf --unobserved >/dev/null
  started=$EPOCHREALTIME
  start_process "$((port + 1))" --roles reconciler "$db_args" "$vector_args"
  until status=$("$roncho" status --listen "127.0.0.1:$((port + 1))" "$db_args" "$vector_args" 2>/dev/null) &&
    grep -Eq "^message vectors +ok +[0-9]+ synced, 0 pending" <<<"$status"; do
    sleep 0.5
  done
  python3 -c "import sys; print(f'{sys.argv[1]}: {sys.argv[2]} messages synced in {float(sys.argv[4]) - float(sys.argv[3]):.1f} s')" \
    "$layout" "$messages" "$started" "$EPOCHREALTIME"
  grep -E "^vector store" <<<"$status"
  if [ "$layout" = counted ]; then
    psql "${server_url%/*}/$database" -Atc "SELECT 'counted: ' || COUNT(*) || ' messages, ' || \
      (SELECT COUNT(*) FROM workspace_terms) || ' workspace terms' FROM message_terms"
  fi
  stop_processes
}

for _ in $(seq 1 "$rounds"); do
  run counted
  run uncounted
done
