#!/usr/bin/env bash
# Derivation scale-out: one Postgres, one ingest+recall+reconciler process,
# and 1, 2 and 4 `roncho serve --roles deriver` processes sharing the work
# queue — NATS JetStream (127.0.0.1:4222) or the SQL queue — against a
# scripted LLM with a fixed latency (loadtests/scripted_llm.py, 200 ms).
# Writes N messages (20 sessions of 100 by two peers), then times until
# `roncho status` shows the queue drained (tasks/s, work units/s, LLM
# calls); then, with the derivers idle, times CreateMessages → the
# observation returned by QueryConclusions, one message at a time.
#
#   loadtests/run-derive.sh [messages, default 2000] [nats|sql|both, default both]
set -euo pipefail
cd "$(dirname "$0")/.."
port=50976
source loadtests/common.sh
messages=${1:-2000}
queues=${2:-both}
[ "$queues" = both ] && queues="nats sql"
nats_url=${RONCHO_TEST_NATS_URL:-nats://127.0.0.1:4222}
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest

start_scripted_llm
export RONCHO_EMBEDDING_PROVIDER=test-hashing RONCHO_LLM_BASE_URL=$llm_url/v1 RONCHO_LLM_MODEL=scripted

echo "# $(date -u +%F) $(nproc) cores; $messages messages; scripted LLM 200 ms"
for queue in $queues; do
for workers in 1 2 4; do
  if [ "$queue" = nats ]; then
    export RONCHO_NATS_URL=$nats_url RONCHO_NATS_PREFIX=bench_$$_$workers
  else
    unset RONCHO_NATS_URL RONCHO_NATS_PREFIX
  fi
  db_args=$(postgres_args)
  RONCHO_ROLES=ingest,recall,reconciler start_server "$db_args"
  "$loadtest" --target "http://127.0.0.1:$port" search-ingest --messages "$messages" --session-size 100 --workspace derive >/dev/null
  pids=()
  calls_before=$(llm_calls)
  started=$(date +%s.%N)
  for i in $(seq 1 "$workers"); do
    "$roncho" serve --roles deriver --listen "127.0.0.1:$((port + 10 + i))" --log warn "$db_args" &
    pids+=($!)
  done
  until "$roncho" status --listen "127.0.0.1:$port" "$db_args" 2>/dev/null | grep -Eq "^work queue +ok +0 pending, 0 in progress"; do
    sleep 0.5
  done
  elapsed=$(python3 -c "import time;print(f'{time.time()-$started:.1f}')")
  line=$("$roncho" status --listen "127.0.0.1:$port" "$db_args" 2>/dev/null | grep "^work queue")
  calls=$(( $(llm_calls) - calls_before ))
  units=$(psql "${db_args#--database-url=}" -Atc "SELECT COUNT(DISTINCT work_unit_key) FROM work_tasks")
  tasks=$(psql "${db_args#--database-url=}" -Atc "SELECT COUNT(*) FROM work_tasks")
  conclusions=$(psql "${db_args#--database-url=}" -Atc "SELECT COUNT(*) FROM documents")
  rates=$(python3 -c "print(f'{$tasks/$elapsed:.1f} tasks/s, {$units/$elapsed:.2f} work units/s')")
  echo "$queue, deriver processes $workers: $tasks tasks in $units work units drained in ${elapsed} s ($rates), $calls LLM calls, $conclusions conclusions; $line"
  "$loadtest" --target "http://127.0.0.1:$port" --label "$queue x$workers" visibility --samples 10
  kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
  stop_server
  psql "$server_url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null
done
done
