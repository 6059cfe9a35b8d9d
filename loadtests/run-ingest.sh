#!/usr/bin/env bash
# Ingest benchmark: starts a release `roncho serve` in the embedded mode and
# on Postgres (a fresh database), drives it with `roncho-loadtest ingest`, and
# prints one line per mode and RPC. Loopback only; bounded request counts.
#
#   loadtests/run-ingest.sh [extra roncho-loadtest ingest flags]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/roncho/target}
server_url=${RONCHO_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}

cargo build --release --locked -p roncho -p roncho-loadtests
roncho=$CARGO_TARGET_DIR/release/roncho
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest
work=$(mktemp -d)
database=roncho_bench_$$
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  psql "$server_url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

run() { # label serve-args...
  local label=$1; shift
  "$roncho" serve --listen 127.0.0.1:50971 --log warn "$@" &
  pid=$!
  for _ in $(seq 1 50); do "$roncho" status --listen 127.0.0.1:50971 "$@" 2>/dev/null | grep -q "^server .*ok" && break; sleep 0.2; done
  "$loadtest" --target http://127.0.0.1:50971 --label "$label" ingest "${extra[@]}"
  kill -TERM "$pid"; wait "$pid"; pid=""
}

extra=("$@")
echo "# $(date -u +%F) $(nproc) cores; roncho-loadtest ingest ${extra[*]}"
run embedded --data-dir "$work/data"
psql "$server_url" -qc "CREATE DATABASE $database" >/dev/null
run postgres --database-url "${server_url%/*}/$database"
