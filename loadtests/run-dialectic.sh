#!/usr/bin/env bash
# Dialectic benchmark: a release `roncho serve` (every role, embedded) with
# a 2,000-message corpus from `search-ingest`, then `roncho-loadtest
# dialectic` — Chat about peer `user` at a reasoning level — extractive
# (roncho's own cost: prefetch, search, the answer with ids) and with the
# scripted model (200 ms a call).
#
#   loadtests/run-dialectic.sh [extra roncho-loadtest dialectic flags]
set -euo pipefail
cd "$(dirname "$0")/.."
port=50983
source loadtests/common.sh
start_scripted_llm
export RONCHO_EMBEDDING_PROVIDER=${RONCHO_EMBEDDING_PROVIDER:-test-hashing}
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest
extra=("$@")
echo "# $(date -u +%F) $(nproc) cores; roncho-loadtest dialectic ${extra[*]}; embedder $RONCHO_EMBEDDING_PROVIDER"
for model in none scripted; do
  if [ "$model" = scripted ]; then
    export RONCHO_LLM_BASE_URL=$llm_url/v1 RONCHO_LLM_MODEL=scripted
  fi
  rm -rf "$work/data"
  start_server --data-dir "$work/data"
  "$loadtest" --target "http://127.0.0.1:$port" search-ingest --messages 2000 --session-size 100 >/dev/null
  for level in minimal medium; do
    "$loadtest" --target "http://127.0.0.1:$port" --label "$model/$level" dialectic --level "$level" "${extra[@]}"
  done
  stop_server
done
