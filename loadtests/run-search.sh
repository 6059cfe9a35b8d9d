#!/usr/bin/env bash
# Search and context speed: writes a generated corpus of N messages into one
# workspace (one session holds the first 10,000), waits until every vector is
# synced, then measures SearchMessages (2 concurrent clients, limit 10) and
# GetSessionContext (4,000 tokens) on the 10,000-message session.
# Vectors come from the test hashing embedder at 384 dimensions (MiniLM's
# size): this measures search cost, not quality, and leaves out the query's
# embedding time (see docs/benchmarks.md). Corpora: loadtests/src/corpus.rs.
#
#   loadtests/run-search.sh                 the table in docs/benchmarks.md
#   loadtests/run-search.sh N [corpus] [provider] [backend]
#                                           one run (corpus zipf|dense;
#                                           provider test-hashing|auto, where auto
#                                           is the local model (bge-small-en-v1.5, or
#                                           MiniLM where only it is installed): query
#                                           embedding included; syncing runs at ~25
#                                           (MiniLM ~50) messages/s on 2 cores;
#                                           backend embedded|qdrant, where qdrant is
#                                           Postgres with the real Qdrant, ADR 0007)
set -euo pipefail
cd "$(dirname "$0")/.."
port=50974
source loadtests/common.sh
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest
export RONCHO_EMBEDDING_DIMENSIONS=384

run() { # label messages corpus provider serve-args...
  local label=$1 messages=$2 corpus=$3
  export RONCHO_EMBEDDING_PROVIDER=$4
  shift 4
  start_server "$@"
  local started=$SECONDS
  "$loadtest" --target "http://127.0.0.1:$port" --label "$label" search-ingest --messages "$messages" --corpus "$corpus" >/dev/null
  if [ "$RONCHO_EMBEDDING_PROVIDER" != none ]; then
    until "$roncho" status --listen "127.0.0.1:$port" "$@" 2>/dev/null | grep -Eq "^message vectors +ok +[0-9]+ synced, 0 pending"; do
      [ $((SECONDS - started)) -gt 3000 ] && { echo "vectors did not sync"; exit 1; }
      sleep 2
    done
  fi
  echo "# $label: $messages messages ($corpus) written and synced in $((SECONDS - started)) s"
  [ -z "${RONCHO_QDRANT_COLLECTION:-}" ] || qdrant_indexed
  # RONCHO_SEARCH_ARGS: more arguments for the search phase, e.g.
  # `--new-queries --concurrency 1` (no query answered from the embedding cache, one client).
  # shellcheck disable=SC2086
  "$loadtest" --target "http://127.0.0.1:$port" --label "$label" search --corpus "$corpus" ${RONCHO_SEARCH_ARGS:-}
  stop_server
  rm -rf "$work"/data-*
}

echo "# $(date -u +%F) $(nproc) cores"
if [ $# -gt 0 ]; then
  case ${4:-embedded} in
    embedded) run "embedded-$1-${2:-zipf}-${3:-test-hashing}" "$1" "${2:-zipf}" "${3:-test-hashing}" --data-dir "$work/data-$1" ;;
    qdrant)
      qdrant_args >/dev/null
      run "qdrant-$1-${2:-zipf}-${3:-test-hashing}" "$1" "${2:-zipf}" "${3:-test-hashing}" "$(postgres_args)" "--qdrant-url=$qdrant_url" ;;
    *) echo "backend: embedded or qdrant" >&2; exit 2 ;;
  esac
else
  run embedded-10k 10000 zipf test-hashing --data-dir "$work/data-10k"
  run embedded-100k 100000 zipf test-hashing --data-dir "$work/data-100k"
  run embedded-1m 1000000 zipf test-hashing --data-dir "$work/data-1m"
  run embedded-100k-dense 100000 dense test-hashing --data-dir "$work/data-100k-dense"
  run postgres-10k 10000 zipf test-hashing "$(postgres_args)"
  psql "$server_url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null
  run postgres-100k-fulltext 100000 zipf none "$(postgres_args)"
fi
