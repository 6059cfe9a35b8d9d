#!/usr/bin/env bash
# Retrieval quality: starts a release `roncho serve` (embedded, then on a fresh
# Postgres database) and runs `roncho-eval locomo` on the given LoCoMo-format
# files. Without arguments: the development set in ../shared/eval (never
# copied into this repository), each of its conversations scored alone, a
# seeded synthetic set, and two folds of generated long assistant
# conversations (`roncho-eval longconv`).
#
#   loadtests/run-eval.sh [file.json ...]
#   RONCHO_EVAL_BACKENDS=embedded loadtests/run-eval.sh    one backend
#   RONCHO_EVAL_DUMP=dir loadtests/run-eval.sh    also writes each question's
#     evidence and ranking to dir/<backend>-<file>.jsonl, to see what was missed
set -euo pipefail
cd "$(dirname "$0")/.."
port=50972
source loadtests/common.sh
eval_bin=$CARGO_TARGET_DIR/release/roncho-eval

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  # Each development conversation scored alone: a setting chosen on one is
  # checked on the other (cross-validation, issue 36).
  if [ -f ../shared/eval/locomo-dev.json ]; then
    python3 - ../shared/eval/locomo-dev.json "$work" <<'PY'
import json, sys
for sample in json.load(open(sys.argv[1])):
    json.dump([sample], open(f"{sys.argv[2]}/{sample['sample_id']}.json", "w"))
PY
    files+=("$work"/conv-*.json)
  fi
  "$eval_bin" synth --seed 1 --conversations 5 --out "$work/synth-seed1.json" >/dev/null
  files+=("$work/synth-seed1.json")
  # Long coding and planning assistant conversations (issue 58), two folds:
  # each seed's file is two coding and two planning conversations (116
  # questions; with one of each, 58, the folds differed by 0.12 from chance
  # alone; docs/benchmarks.md, "Folds large enough to compare").
  for seed in 1 2; do
    "$eval_bin" longconv --seed $seed --conversations 4 --out "$work/long-seed$seed.json" >/dev/null
    files+=("$work/long-seed$seed.json")
  done
fi

run() { # label serve-args...
  local label=$1; shift
  start_server "$@"
  for file in "${files[@]}"; do
    "$eval_bin" locomo --target http://127.0.0.1:$port --data "$file" --phase ingest --run-id "$label" >/dev/null
  done
  # Ask only once every message has its vector, as a user would after a few seconds.
  # (The status is read whole before grep: `status | grep -q` under pipefail
  # fails when grep stops reading early, which skipped this wait.)
  local started=$SECONDS
  status() { "$roncho" status --listen 127.0.0.1:$port "$@" 2>/dev/null || true; }
  grep -Eq "^semantic search +ok" <<<"$(status "$@")" &&
  until grep -Eq "^message vectors +ok +[0-9]+ synced, 0 pending" <<<"$(status "$@")"; do
    [ $((SECONDS - started)) -gt 3600 ] && { echo "vectors did not sync within 3600 s"; "$roncho" status --listen 127.0.0.1:$port "$@"; exit 1; }
    sleep 1
  done
  echo "# vectors synced $((SECONDS - started)) s after ingest"
  for file in "${files[@]}"; do
    echo "## $label: $(basename "$file")"
    local dump=()
    [ -z "${RONCHO_EVAL_DUMP:-}" ] || dump=(--dump "$RONCHO_EVAL_DUMP/$label-$(basename "$file" .json).jsonl")
    "$eval_bin" locomo --target http://127.0.0.1:$port --data "$file" --phase query --run-id "$label" "${dump[@]}"
  done
  stop_server
}

for backend in ${RONCHO_EVAL_BACKENDS:-embedded postgres postgres+qdrant}; do
  case $backend in
    embedded) run embedded --data-dir "$work/data" ;;
    postgres) run postgres "$(postgres_args)" ;;
    # The distributed mode's store: Qdrant ranks both lists (ADR 0007).
    postgres+qdrant)
      qdrant_args >/dev/null
      run postgres+qdrant "$(postgres_args)" "--qdrant-url=$qdrant_url" ;;
    *) echo "RONCHO_EVAL_BACKENDS: embedded, postgres or postgres+qdrant" >&2; exit 2 ;;
  esac
done
