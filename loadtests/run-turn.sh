#!/usr/bin/env bash
# Agent-turn benchmark: a release `roncho serve` (every role in one process),
# embedded and on Postgres, driven by `roncho-loadtest turn`: per turn
# GetSessionContext → Chat → CreateMessages, from concurrent conversations.
# Without RONCHO_LLM_* the dialectic is extractive, so this measures
# roncho's own cost per turn; with the scripted model (200 ms) it shows the
# turn with a model's latency in it.
#
#   loadtests/run-turn.sh [extra roncho-loadtest turn flags]
#   RONCHO_SCRIPTED_LLM=1 loadtests/run-turn.sh
set -euo pipefail
cd "$(dirname "$0")/.."
port=50981
source loadtests/common.sh
if [ -n "${RONCHO_SCRIPTED_LLM:-}" ]; then
  start_scripted_llm
  export RONCHO_LLM_BASE_URL=$llm_url/v1 RONCHO_LLM_MODEL=scripted
fi
export RONCHO_EMBEDDING_PROVIDER=${RONCHO_EMBEDDING_PROVIDER:-none}

extra=("$@")
echo "# $(date -u +%F) $(nproc) cores; roncho-loadtest turn ${extra[*]}; model: ${RONCHO_LLM_MODEL:-none (extractive)}"
run_loadtest embedded turn --data-dir "$work/data"
run_loadtest postgres turn "$(postgres_args)"
