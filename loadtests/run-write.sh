#!/usr/bin/env bash
# The write path (issue 18): CreateMessages in batches of 100 from one
# client and from 8 (each on its own session), from the Rust load generator
# (`roncho-loadtest ingest`) and from Python (loadtests/python_ingest.py,
# stubs generated from proto/), embedded and on Postgres. Derivation tasks
# are written with the messages (the writers observe themselves, Honcho's
# default) and semantic search is configured (the test hashing embedder:
# the reconciler embeds beside the writes, never on their path); the server
# runs the ingest, recall and reconciler roles, so no deriver consumes the
# tasks during the run.
#
#   loadtests/run-write.sh [batches per run]
#
# RONCHO_BENCH_ROLES=ingest,recall runs the server without the reconciler:
# the API processes of the distributed mode, whose reconciler runs
# elsewhere (here its work waits until the run ends).
set -euo pipefail
cd "$(dirname "$0")/.."
port=50991
source loadtests/common.sh
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest
batches=${1:-300}
export RONCHO_EMBEDDING_PROVIDER=test-hashing RONCHO_EMBEDDING_DIMENSIONS=384

venv=${RONCHO_CACHE:-$HOME/.cache/roncho}/venv-python-client
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import grpc_tools" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q grpcio==1.85.1 grpcio-tools==1.85.1 grpcio-status==1.85.1
fi
mkdir -p "$work/gen"
"$venv/bin/python" -m grpc_tools.protoc -I proto --python_out="$work/gen" --grpc_python_out="$work/gen" proto/roncho/v1/*.proto

run() { # label serve-args...
  local label=$1
  shift
  start_server --roles "${RONCHO_BENCH_ROLES:-ingest,recall,reconciler}" --rest-listen off "$@"
  for clients in 1 8; do
    "$loadtest" --target "http://127.0.0.1:$port" --label "$label, rust, $clients client(s)" ingest \
      --batches "$batches" --concurrency "$clients" --lists 0
    PYTHONPATH="$work/gen" "$venv/bin/python" loadtests/python_ingest.py --target "127.0.0.1:$port" \
      --batches "$batches" --clients "$clients" --label "$label, python, $clients client(s)"
  done
  stop_server
}

echo "# $(date -u +%F) $(nproc) cores; $batches batches of 100 per run"
run embedded --data-dir "$work/data"
run postgres "$(postgres_args)"
