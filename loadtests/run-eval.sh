#!/usr/bin/env bash
# Retrieval quality: starts a release `roncho serve` (embedded, then on a fresh
# Postgres database) and runs `roncho-eval locomo` on the given LoCoMo-format
# files. Without arguments: the development set in ../shared/eval (never
# copied into this repository) and a seeded synthetic set.
#
#   loadtests/run-eval.sh [file.json ...]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/roncho/target}
server_url=${RONCHO_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}

cargo build --release --locked -p roncho -p roncho-loadtests
roncho=$CARGO_TARGET_DIR/release/roncho
eval_bin=$CARGO_TARGET_DIR/release/roncho-eval
work=$(mktemp -d)
database=roncho_eval_$$
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  psql "$server_url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  [ -f ../shared/eval/locomo-dev.json ] && files+=(../shared/eval/locomo-dev.json)
  "$eval_bin" synth --seed 1 --conversations 5 --out "$work/synth-seed1.json" >/dev/null
  files+=("$work/synth-seed1.json")
fi

run() { # label serve-args...
  local label=$1; shift
  "$roncho" serve --listen 127.0.0.1:50972 --log warn "$@" &
  pid=$!
  for _ in $(seq 1 50); do "$roncho" status --listen 127.0.0.1:50972 "$@" 2>/dev/null | grep -q "^server .*ok" && break; sleep 0.2; done
  for file in "${files[@]}"; do
    "$eval_bin" locomo --target http://127.0.0.1:50972 --data "$file" --phase ingest --run-id "$label" >/dev/null
  done
  # Ask only once every message has its vector, as a user would after a few seconds.
  local started=$SECONDS
  until "$roncho" status --listen 127.0.0.1:50972 "$@" 2>/dev/null | grep -Eq "^message vectors +ok +[0-9]+ synced, 0 pending"; do
    [ $((SECONDS - started)) -gt 600 ] && { echo "vectors did not sync within 600 s"; "$roncho" status --listen 127.0.0.1:50972 "$@"; exit 1; }
    sleep 1
  done
  echo "# vectors synced $((SECONDS - started)) s after ingest"
  for file in "${files[@]}"; do
    echo "## $label: $(basename "$file")"
    "$eval_bin" locomo --target http://127.0.0.1:50972 --data "$file" --phase query --run-id "$label"
  done
  kill -TERM "$pid"; wait "$pid"; pid=""
}

run embedded --data-dir "$work/data"
psql "$server_url" -qc "CREATE DATABASE $database" >/dev/null
run postgres --database-url "${server_url%/*}/$database"
