# Shared by the benchmark scripts: release binaries, a scratch directory, a
# fresh Postgres database, and starting/stopping `roncho serve` on loopback.
# Source it after `cd` to the repository root; set `port` first.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/roncho/target}
server_url=${RONCHO_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
cargo build --release --locked -p roncho -p roncho-loadtests
# RONCHO_BIN runs another build of the server (a before/after comparison).
roncho=${RONCHO_BIN:-$CARGO_TARGET_DIR/release/roncho}
work=$(mktemp -d)
database=roncho_bench_$$
pid=""
pids=()
qdrant_pid=""
source scripts/qdrant.sh
# end_all pid...: SIGTERMs each process still running, waits for each, and
# reports any that did not exit cleanly.
end_all() {
  local each
  for each in "$@"; do kill -TERM "$each" 2>/dev/null || true; done
  for each in "$@"; do
    wait "$each" 2>/dev/null || echo "process $each exited with status $?" >&2
  done
}
cleanup() {
  [ -z "$pid" ] || end_all "$pid"
  [ ${#pids[@]} -eq 0 ] || end_all "${pids[@]}"
  [ -z "$qdrant_pid" ] || end_all "$qdrant_pid"
  psql "$server_url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# start_scripted_llm: starts loadtests/scripted_llm.py (200 ms a call),
# sets llm_url to it and stops it on exit; llm_calls prints its call count.
start_scripted_llm() {
  python3 loadtests/scripted_llm.py --latency 0.2 > "$work/llm.port" &
  llm_pid=$!
  trap 'kill $llm_pid 2>/dev/null; cleanup' EXIT
  for _ in $(seq 1 50); do [ -s "$work/llm.port" ] && break; sleep 0.1; done
  llm_url=http://127.0.0.1:$(head -1 "$work/llm.port")
}
llm_calls() { python3 -c "import json,urllib.request;print(json.load(urllib.request.urlopen('$llm_url'))['calls'])"; }

# start_process port serve-args...: starts a roncho process on the loopback
# port, adds it to $pids and waits until it serves.
start_process() {
  local at=$1
  shift
  "$roncho" serve --listen "127.0.0.1:$at" --log "${RONCHO_BENCH_LOG:-warn}" "$@" &
  pids+=($!)
  for _ in $(seq 1 100); do "$roncho" status --listen "127.0.0.1:$at" "$@" 2>/dev/null | grep -q "^server .*ok" && return; sleep 0.2; done
  echo "roncho serve $* did not start on port $at" >&2
  return 1
}

# stop_processes: stops every process start_process started (SIGTERM).
stop_processes() {
  [ ${#pids[@]} -eq 0 ] || end_all "${pids[@]}"
  pids=()
}

# start_server serve-args...: starts roncho on $port and waits until it serves.
start_server() {
  start_process "$port" "$@"
  pid=${pids[-1]}
  unset 'pids[-1]'
}

stop_server() {
  end_all "$pid"
  pid=""
}

# postgres_args: creates the fresh database (dropping an earlier one) and
# prints the serve flag for it.
postgres_args() {
  psql "$server_url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null
  psql "$server_url" -qc "CREATE DATABASE $database" >/dev/null
  echo "--database-url=${server_url%/*}/$database"
}

# qdrant_args: starts the real Qdrant once (call it outside `$(...)` first,
# so the server outlives the subshell), exports a fresh collection name as
# RONCHO_QDRANT_COLLECTION and prints the serve flag.
qdrant_args() {
  if [ -z "$qdrant_pid" ]; then
    start_qdrant "$work/qdrant" || { echo "no Qdrant binary (see scripts/qdrant.sh)" >&2; return 1; }
  fi
  export RONCHO_QDRANT_COLLECTION=bench_$$_$((++qdrant_collections))
  echo "--qdrant-url=$qdrant_url"
}
qdrant_collections=0

# qdrant_indexed: waits until Qdrant has finished indexing the run's
# collection (status green: its optimizer built the HNSW graphs of the
# segments a bulk load left unindexed) and says how long that took.
qdrant_indexed() {
  local started=$SECONDS
  until curl -s "$qdrant_http_url/collections/$RONCHO_QDRANT_COLLECTION" | grep -q '"status":"green"'; do
    [ $((SECONDS - started)) -gt 3600 ] && { echo "qdrant did not finish indexing" >&2; return 1; }
    sleep 5
  done
  echo "# qdrant indexed the collection $((SECONDS - started)) s after the sync"
}

# run_loadtest label scenario serve-args...: starts roncho with serve-args,
# runs one roncho-loadtest scenario against it with the caller's "${extra[@]}"
# flags, and stops it.
run_loadtest() {
  local label=$1 scenario=$2
  shift 2
  start_server "$@"
  "$CARGO_TARGET_DIR/release/roncho-loadtest" --target "http://127.0.0.1:$port" --label "$label" "$scenario" "${extra[@]}"
  stop_server
}
