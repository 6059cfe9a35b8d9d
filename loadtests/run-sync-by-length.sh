#!/usr/bin/env bash
# The sync path around the local encoder, by message length (issue 58):
# embedded, bge-small-en-v1.5 (scripts/fetch-bge-small.sh), stored texts in
# the 8-bit encoder (the default). For each length, writers put N messages
# of that many English words with only the API roles running (`--roles
# ingest,recall`: nothing embeds them), then a reconciler alone is started
# on the same data directory and timed, from the process's start (model
# loading included) until `roncho status` shows 0 pending message vectors.
# Compare messages/s with the encoder alone at that length
# (`cargo bench -p roncho-embed --bench embed_documents`).
#
#   loadtests/run-sync-by-length.sh ["words:messages ...", default "44:3000 120:1000 190:600"]
set -euo pipefail
cd "$(dirname "$0")/.."
# Below Linux's ephemeral range (32768+), where outgoing connections could take it.
port=21410
source loadtests/common.sh
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest
model=${RONCHO_TEST_EMBED_MODEL_DIR:-$(scripts/fetch-bge-small.sh)}
export RONCHO_EMBEDDING_PROVIDER=local RONCHO_EMBEDDING_MODEL_DIR=$model
echo "# $(date -u +%F) $(nproc) cores; embedded, $(basename "$model"), documents in ${RONCHO_EMBEDDING_DOCUMENT_PRECISION:-int8}"
for each in ${1:-44:3000 120:1000 190:600}; do
  words=${each%%:*}
  messages=${each##*:}
  data=$(mktemp -d -p "$work")
  start_server --data-dir "$data" --rest-listen off --roles ingest,recall
  # 100 messages/s in batches of 10 from two writers, no readers.
  "$loadtest" --target "http://127.0.0.1:$port" --label "write $words words" sustained \
    --seconds $((messages / 100)) --rate 100 --writers 2 --readers 0 --batch-size 10 --sessions 20 \
    --message-words "$words" --corpus dense --probe-every-ms 0 >/dev/null
  stop_server
  start=$(date +%s.%N)
  start_server --data-dir "$data" --rest-listen off --roles reconciler
  until "$roncho" status --listen "127.0.0.1:$port" --data-dir "$data" 2>/dev/null |
    grep -Eq "^message vectors +ok +[0-9]+ synced, 0 pending"; do
    sleep 0.1
  done
  elapsed=$(echo "$(date +%s.%N) - $start" | bc)
  synced=$("$roncho" status --listen "127.0.0.1:$port" --data-dir "$data" | grep -Eo "^message vectors +ok +[0-9]+" | grep -Eo "[0-9]+$")
  stop_server
  printf 'sync of %d messages of %d words: %.1f s, %.1f messages/s\n' "$synced" "$words" "$elapsed" "$(echo "$synced / $elapsed" | bc -l)"
done
