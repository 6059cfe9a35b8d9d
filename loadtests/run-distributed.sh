#!/usr/bin/env bash
# The distributed mode under load, every role its own release process on
# loopback over one Postgres (fresh database per run) and NATS JetStream
# (127.0.0.1:4222, a fresh stream prefix per run): `--roles ingest`,
# `--roles recall`, `--roles reconciler` (hashing embedder) and N
# `--roles deriver` processes, against a scripted OpenAI-compatible model
# that answers after 200 ms (loadtests/scripted_llm.py).
#
# 1. Capacity: `roncho-loadtest sustained` with unthrottled writers to
#    ingest and readers (search, session context) on recall, no derivers:
#    the sustained ingest rate and per-RPC latency across processes; once
#    with the reconciler embedding every message (hybrid search over the
#    vectors kept in Postgres: no Qdrant here), once full text only.
# 2. Derivation, with 1 and then 3 deriver processes: writers at a fixed
#    rate, readers, and a derivation probe every second (a message written
#    under load until its observation is listed); then the queue drains.
#    Reports the lag and the derived tasks per second.
#
#   loadtests/run-distributed.sh [seconds, default 60] [messages/s in part 2, default 100]
set -euo pipefail
cd "$(dirname "$0")/.."
# Below Linux's ephemeral range (32768+), where outgoing connections could take it.
port=21100
source loadtests/common.sh
seconds=${1:-60}
rate=${2:-100}
nats_url=${RONCHO_TEST_NATS_URL:-nats://127.0.0.1:4222}
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest

start_scripted_llm
export RONCHO_EMBEDDING_PROVIDER=test-hashing RONCHO_LLM_BASE_URL=$llm_url/v1 RONCHO_LLM_MODEL=scripted
export RONCHO_NATS_URL=$nats_url

# deployment derivers: a fresh database and stream; ingest, recall and
# reconciler processes, and `derivers` deriver processes.
deployment() {
  export RONCHO_NATS_PREFIX=bench_$$_$1_$RANDOM
  psql "$server_url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null
  db_args=$(postgres_args)
  start_process "$port" --roles ingest "$db_args"
  start_process "$((port + 1))" --roles recall "$db_args"
  start_process "$((port + 2))" --roles reconciler "$db_args"
  for i in $(seq 1 "$1"); do
    start_process "$((port + 10 + i))" --roles deriver "$db_args"
  done
}

targets=(--ingest-target "http://127.0.0.1:$port" --recall-target "http://127.0.0.1:$((port + 1))")
echo "# $(date -u +%F) $(nproc) cores; sustained load ${seconds} s; scripted LLM 200 ms; NATS + Postgres"

for embedding in test-hashing none; do
  RONCHO_EMBEDDING_PROVIDER=$embedding deployment 0
  "$loadtest" --label "capacity, embedding $embedding" sustained "${targets[@]}" --seconds "$seconds" \
    --writers 4 --readers 2 --batch-size 20 --probe-every-ms 0
  stop_processes
done

for derivers in 1 3; do
  deployment "$derivers"
  calls_before=$(llm_calls)
  "$loadtest" --label "derivers=$derivers" sustained "${targets[@]}" --deriver-target "http://127.0.0.1:$((port + 11))" \
    --seconds "$seconds" --rate "$rate" --writers 2 --readers 2 --batch-size 10 --sessions 40
  echo "derivers=$derivers: $(( $(llm_calls) - calls_before )) LLM calls"
  stop_processes
done
