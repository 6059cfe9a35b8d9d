#!/usr/bin/env bash
# The console's pages on a workspace of 50,000 messages and 10,000
# conclusions (issue 60: each under 200 ms), in headless Chromium against a
# release `roncho serve` (its API roles) on a fresh embedded data
# directory, without a model unless RONCHO_EMBEDDING_MODEL_DIR names one.
#
#   loadtests/run-console-pages.sh path/to/release/roncho [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
roncho=$(realpath "$1")
runs=${2:-10}
data=$(mktemp -d)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
grpc=$(port)
rest=$(port)
provider=none
[ -n "${RONCHO_EMBEDDING_MODEL_DIR:-}" ] && provider=local
# The API roles: the 10,000 conclusions are written, not derived, and the
# 50,000 messages' derivation stays queued (the queue page shows it).
RONCHO_EMBEDDING_PROVIDER=$provider "$roncho" serve --data-dir "$data" --listen "127.0.0.1:$grpc" \
  --rest-listen "127.0.0.1:$rest" --roles ingest,recall,dialectic --log warn &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$data"' EXIT
base=http://127.0.0.1:$rest
for _ in $(seq 1 300); do curl -fs "$base/health" >/dev/null && break; sleep 0.1; done
written=$(python3 loadtests/console_data.py "$base" console)
echo "written: $written" >&2
session=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["a_message"][0])' "$written")
message=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["a_message"][1])' "$written")
sleep 5
cd clients/browser
source ./chromium.sh
node pages-benchmark.mjs "$chromium" "$base" console "$session" "$message" "$runs"
