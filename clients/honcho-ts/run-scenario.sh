#!/usr/bin/env bash
# Honcho's official TypeScript SDK (npm @honcho-ai/sdk, pinned to its
# newest release) against `roncho serve` on the embedded default (the
# local model when RONCHO_TEST_EMBED_MODEL_DIR names it): evidence with
# reasoning_trace_id and conclusions parse unchanged.
#
#   clients/honcho-ts/run-scenario.sh [path/to/roncho]
set -euo pipefail
cd "$(dirname "$0")"
roncho=$(realpath "${1:-${CARGO_TARGET_DIR:-../../target}/debug/roncho}")
npm install --no-audit --no-fund --silent
data=$(mktemp -d)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
grpc=$(port)
rest=$(port)
provider=none
[ -n "${RONCHO_TEST_EMBED_MODEL_DIR:-}" ] && provider=local
RONCHO_EMBEDDING_PROVIDER=$provider RONCHO_EMBEDDING_MODEL_DIR=${RONCHO_TEST_EMBED_MODEL_DIR:-} \
  "$roncho" serve --data-dir "$data" --listen "127.0.0.1:$grpc" --rest-listen "127.0.0.1:$rest" --log warn &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 300); do curl -fs "http://127.0.0.1:$rest/health" >/dev/null && break; sleep 0.1; done
node scenario.mjs "http://127.0.0.1:$rest"
