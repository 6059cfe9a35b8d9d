#!/usr/bin/env bash
# Where the time of the calls an agent makes every turn goes, per call,
# two builds side by side on both backends: session context (4,000
# tokens), a page of 100 messages, a page of 1 (the fixed cost of a call)
# and a batch of 100 44-word messages, each timed by loadtests/hot_path.py
# with the server's CPU per call. The data is the Honcho workload's
# (../shared/bench/honcho_workload.py: session s0 of 5,000 messages in a
# workspace of 50,000), written once per backend by OLD; each build then
# serves its own copy (a copied data directory, or a Postgres database made
# from it as a template; NEW migrates its copy) with --roles ingest,recall
# and no model, so nothing runs beside the calls.
#
#   loadtests/run-hot-path.sh OLD_BINARY NEW_BINARY [rounds] [backends]
#   (default 2 rounds, "embedded postgres")
# RONCHO_HOT_PATH_KINDS picks the calls (default "context list:100 list:1
# ingest"; also filtered:SIZE and sessions:SIZE, see loadtests/hot_path.py).
# RONCHO_HOT_PATH_ROLES=all serves the copies with every role instead:
# the deriver then works through the data's 50,000 underived messages
# beside the calls.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="run-hot-path.sh OLD NEW [rounds] [backends]"
source loadtests/workload-common.sh
source_db=roncho_hot_source_$$
copy_db=roncho_hot_copy_$$
drop_databases() {
  for db in "$source_db" "$copy_db"; do
    psql "$server_url" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  done
}
trap 'stop; drop_databases; rm -rf "$work"' EXIT
# The data is written with ingest and recall alone (nothing derived).
writing=(--roles ingest,recall)
measured=(--roles "${RONCHO_HOT_PATH_ROLES:-ingest,recall}")
[ "${RONCHO_HOT_PATH_ROLES:-}" = all ] && measured=()
roles=("${writing[@]}")
# serve BIN STORE-ARGS...: starts BIN with $roles, sets $server and $rest.
serve() {
  local bin=$1
  shift
  rest=$(free_port)
  env -u RONCHO_EMBEDDING_MODEL_DIR RONCHO_EMBEDDING_PROVIDER=none \
    "$bin" serve "${roles[@]}" --listen "127.0.0.1:$(free_port)" --rest-listen "127.0.0.1:$rest" "$@" \
    --log warn >>"$work/server.log" 2>&1 &
  server=$!
  for _ in $(seq 1 150); do curl -sf "http://127.0.0.1:$rest/health" >/dev/null && return; sleep 0.2; done
  echo "$bin did not start" >&2
  return 1
}

for backend in $backends; do
  roles=("${writing[@]}")
  if [ "$backend" = postgres ]; then
    drop_databases
    psql "$server_url" -qc "CREATE DATABASE $source_db" >/dev/null
    serve "$old" --database-url "${server_url%/*}/$source_db"
  else
    serve "$old" --data-dir "$work/source"
  fi
  "$venv/bin/python" "$workload" --base-url "http://127.0.0.1:$rest" --server roncho --workspace hot \
    --calls 5 --warmup 1 --out "$work/setup.json" >/dev/null
  stop
  roles=("${measured[@]}")
  for round in $(seq 1 "$rounds"); do
    for build in old new; do
      bin=$old
      [ "$build" = new ] && bin=$new
      if [ "$backend" = postgres ]; then
        psql "$server_url" -qc "DROP DATABASE IF EXISTS $copy_db WITH (FORCE)" >/dev/null
        psql "$server_url" -qc "CREATE DATABASE $copy_db TEMPLATE $source_db" >/dev/null
        serve "$bin" --database-url "${server_url%/*}/$copy_db"
      else
        rm -rf "$work/copy"
        cp -r "$work/source" "$work/copy"
        serve "$bin" --data-dir "$work/copy"
      fi
      echo "== $backend, round $round, $build ($bin)"
      for kind in ${RONCHO_HOT_PATH_KINDS:-context list:100 list:1 ingest}; do
        size=100 calls=1000
        case $kind in
          *:*) size=${kind#*:} ;;
          ingest) calls=200 ;;
        esac
        SIZE=$size "$venv/bin/python" loadtests/hot_path.py "http://127.0.0.1:$rest" hot "${kind%%:*}" "$calls" "$server" |
          sed "s/^\(list\|filtered\|sessions\) */\1 $size /"
      done
      stop
    done
  done
done
