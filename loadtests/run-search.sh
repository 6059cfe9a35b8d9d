#!/usr/bin/env bash
# Search and context speed: writes a generated corpus of N messages into one
# workspace (one session holds the first 10,000), waits until every vector is
# synced, then measures SearchMessages (hybrid: full text + exact vector scan,
# 2 concurrent clients) and GetSessionContext on the 10,000-message session.
# Vectors come from the test hashing embedder at 384 dimensions (MiniLM's
# size): this measures search cost, not quality, and leaves out the query's
# embedding time (see docs/benchmarks.md).
#
#   loadtests/run-search.sh [N ...]     (default: 10000 100000 embedded, 10000 Postgres)
set -euo pipefail
cd "$(dirname "$0")/.."
port=50974
source loadtests/common.sh
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest
export RONCHO_EMBEDDING_PROVIDER=test-hashing RONCHO_EMBEDDING_DIMENSIONS=384

run() { # label messages serve-args...
  local label=$1 messages=$2; shift 2
  start_server "$@"
  local started=$SECONDS
  "$loadtest" --target "http://127.0.0.1:$port" --label "$label" search-ingest --messages "$messages" >/dev/null
  until "$roncho" status --listen "127.0.0.1:$port" "$@" 2>/dev/null | grep -Eq "^message vectors +ok +[0-9]+ synced, 0 pending"; do
    [ $((SECONDS - started)) -gt 1200 ] && { echo "vectors did not sync"; exit 1; }
    sleep 1
  done
  echo "# $label: $messages messages written and synced in $((SECONDS - started)) s"
  "$loadtest" --target "http://127.0.0.1:$port" --label "$label" search
  stop_server
}

echo "# $(date -u +%F) $(nproc) cores"
if [ $# -gt 0 ]; then
  for n in "$@"; do run "embedded-$n" "$n" --data-dir "$work/data-$n"; done
else
  run embedded-10k 10000 --data-dir "$work/data-10k"
  run embedded-100k 100000 --data-dir "$work/data-100k"
  run postgres-10k 10000 "$(postgres_args)"
fi
