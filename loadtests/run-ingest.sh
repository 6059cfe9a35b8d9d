#!/usr/bin/env bash
# Ingest benchmark: starts a release `roncho serve` in the embedded mode and
# on Postgres (a fresh database), drives it with `roncho-loadtest ingest`, and
# prints one line per mode and RPC. Loopback only; bounded request counts.
#
#   loadtests/run-ingest.sh [extra roncho-loadtest ingest flags]
set -euo pipefail
cd "$(dirname "$0")/.."
port=50971
source loadtests/common.sh

run() { # label serve-args...
  local label=$1; shift
  start_server "$@"
  "$CARGO_TARGET_DIR/release/roncho-loadtest" --target "http://127.0.0.1:$port" --label "$label" ingest "${extra[@]}"
  stop_server
}

extra=("$@")
echo "# $(date -u +%F) $(nproc) cores; roncho-loadtest ingest ${extra[*]}"
run embedded --data-dir "$work/data"
run postgres "$(postgres_args)"
