#!/usr/bin/env bash
# How far meaning falls behind writes (issue 58): `roncho serve` as the
# README starts it (embedded, the local model bge-small-en-v1.5 from
# scripts/fetch-bge-small.sh, the extractive deriver running and sharing the
# model for its dedup), writers at a fixed rate of N-word messages, and a
# reader whose every SearchMessages reply says how long the oldest message
# not yet found by meaning has waited (`meaning_lag_seconds`). A message
# written is searchable by meaning once it is no longer waiting: the lag's
# maximum bounds how long any message waited. The reader asks twice a
# second (a search and a session context each time), as an agent's turns
# do. Run once per document precision (the 8-bit encoder, then the float
# model), in turn.
#
#   loadtests/run-meaning.sh [messages/s, default 100] [words, default 44] [seconds, default 60]
set -euo pipefail
cd "$(dirname "$0")/.."
# Below Linux's ephemeral range (32768+), where outgoing connections could take it.
port=21400
source loadtests/common.sh
rate=${1:-100}
words=${2:-44}
seconds=${3:-60}
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest
model=${RONCHO_TEST_EMBED_MODEL_DIR:-$(scripts/fetch-bge-small.sh)}
echo "# $(date -u +%F) $(nproc) cores; $rate messages/s of $words words for $seconds s; embedded, $(basename "$model"), extractive deriver"

for precision in ${RONCHO_MEANING_PRECISIONS:-int8 float}; do
  data=$(mktemp -d -p "$work")
  RONCHO_EMBEDDING_PROVIDER=local RONCHO_EMBEDDING_MODEL_DIR=$model RONCHO_EMBEDDING_DOCUMENT_PRECISION=$precision \
    start_server --data-dir "$data" --rest-listen off
  echo "## documents in $precision"
  "$loadtest" --target "http://127.0.0.1:$port" --label "meaning $precision" sustained \
    --seconds "$seconds" --rate "$rate" --writers 2 --readers 1 --batch-size 10 --sessions 20 \
    --message-words "$words" --corpus dense --probe-every-ms 0 --read-every-ms 500
  "$roncho" status --listen "127.0.0.1:$port" --data-dir "$data" | grep -E "^message vectors" || true
  stop_server
done
