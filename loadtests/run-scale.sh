#!/usr/bin/env bash
# Search at scale in the distributed mode: ingest, recall and reconciler as
# separate release processes over one Postgres (fresh database), NATS
# JetStream and the real Qdrant (../shared/tools/qdrant; fresh collection),
# where Qdrant ranks full text and vectors, two queries at once (ADR 0007).
# Vectors come from the test hashing embedder at 384 dimensions (MiniLM's
# size): this measures search cost, not quality, and leaves out embedding
# the query (measured in docs/benchmarks.md).
#
# 1. Writes N messages (default 1,000,000) of a generated corpus into one
#    workspace and waits until every vector is synced.
# 2. SearchMessages (2 clients, limit 10) and GetSessionContext, idle.
# 3. The same while a writer keeps adding messages to that workspace
#    (100-message batches), the load rising phase by phase: paced at 100,
#    300 and 1,000 messages/s, then as fast as they are taken. Each phase
#    reports search latency under that ingest and the ingest rate; rising
#    so that no phase inherits a heavier one's indexing backlog.
#
# With RONCHO_BENCH_MONITOR=FILE, loadtests/monitor.py writes the CPU each
# process kind used and Qdrant's segment state to FILE every 15 s, and each
# phase prints its start time.
#
# The writing peers are unobserved (`observe_me: false`): with no deriver
# process, a million queued derivations would only measure the work ledger's
# republishing of work nobody takes, not search.
#
#   loadtests/run-scale.sh [messages] [corpus zipf|dense]
set -euo pipefail
cd "$(dirname "$0")/.."
# Below Linux's ephemeral range (32768+), where outgoing connections could take it.
port=21200
source loadtests/common.sh
messages=${1:-1000000}
corpus=${2:-zipf}
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest
export RONCHO_EMBEDDING_PROVIDER=test-hashing RONCHO_EMBEDDING_DIMENSIONS=384
export RONCHO_NATS_URL=${RONCHO_TEST_NATS_URL:-nats://127.0.0.1:4222} RONCHO_NATS_PREFIX=scale_$$_$RANDOM

qdrant_args >/dev/null
db_args=$(postgres_args)
vector_args=("--qdrant-url=$qdrant_url")
start_process "$port" --roles ingest "$db_args" "${vector_args[@]}"
start_process "$((port + 1))" --roles recall "$db_args" "${vector_args[@]}"
start_process "$((port + 2))" --roles reconciler "$db_args" "${vector_args[@]}"
ingest=http://127.0.0.1:$port
recall=http://127.0.0.1:$((port + 1))
echo "# $(date -u +%F) $(nproc) cores; $messages messages ($corpus); Postgres + Qdrant + NATS, separate processes"

started=$SECONDS
if [ -n "${RONCHO_BENCH_MONITOR:-}" ]; then
  python3 loadtests/monitor.py "$qdrant_http_url/collections/$RONCHO_QDRANT_COLLECTION" 15 >"$RONCHO_BENCH_MONITOR" &
  monitor=$!
  trap 'kill $monitor 2>/dev/null; cleanup' EXIT
fi
phase() { [ -z "${RONCHO_BENCH_MONITOR:-}" ] || echo "# $(date +%T) $*"; }
phase write
"$loadtest" --target "$ingest" --label "write $messages" search-ingest --messages "$messages" --corpus "$corpus" --unobserved
echo "# written in $((SECONDS - started)) s"
until "$roncho" status --listen "127.0.0.1:$((port + 2))" "$db_args" "${vector_args[@]}" 2>/dev/null |
  grep -Eq "^message vectors +ok +[0-9]+ synced, 0 pending"; do
  [ $((SECONDS - started)) -gt 7200 ] && { echo "vectors did not sync"; exit 1; }
  sleep 5
done
echo "# written and synced in $((SECONDS - started)) s"
qdrant_indexed
"$roncho" status --listen "127.0.0.1:$((port + 1))" "$db_args" "${vector_args[@]}" | grep -E "^(vector store|message vectors)"

phase search idle
"$loadtest" --target "$recall" --label "search, idle, $messages messages" search --corpus "$corpus" --queries 2000

# during_writes messages queries rate: searches while a writer adds messages
# to the searched workspace (its sessions grow), at rate messages/s (0:
# as fast as they are taken).
during_writes() {
  local count=$1 queries=$2 rate=$3 pace="" writer
  [ "$rate" -eq 0 ] || pace=" at $rate/s"
  phase "search during writes${pace:-, unthrottled}"
  "$loadtest" --target "$ingest" --label "ingest$pace during search" search-ingest --messages "$count" --corpus "$corpus" --unobserved --rate "$rate" &
  writer=$!
  sleep 3
  "$loadtest" --target "$recall" --label "search during ingest$pace" search --corpus "$corpus" --queries "$queries"
  wait "$writer"
}
during_writes 12000 3000 100
during_writes 36000 3000 300
during_writes 100000 3000 1000
during_writes 150000 2000 0
phase done
"$roncho" status --listen "127.0.0.1:$((port + 1))" "$db_args" "${vector_args[@]}" | grep -E "^message vectors"
echo "# qdrant: resident $(( $(ps -o rss= -p "$qdrant_pid") / 1024 )) MiB, storage $(du -sm "$work/qdrant/storage" | cut -f1) MiB"
psql "${server_url%/*}/$database" -Atc "SELECT 'postgres: messages ' || pg_size_pretty(pg_total_relation_size('messages'))"
