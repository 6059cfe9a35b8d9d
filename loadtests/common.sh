# Shared by the benchmark scripts: release binaries, a scratch directory, a
# fresh Postgres database, and starting/stopping `roncho serve` on loopback.
# Source it after `cd` to the repository root; set `port` first.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/roncho/target}
server_url=${RONCHO_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
cargo build --release --locked -p roncho -p roncho-loadtests
roncho=$CARGO_TARGET_DIR/release/roncho
work=$(mktemp -d)
database=roncho_bench_$$
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  psql "$server_url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# start_server serve-args...: starts roncho and waits until it serves.
start_server() {
  "$roncho" serve --listen "127.0.0.1:$port" --log warn "$@" &
  pid=$!
  for _ in $(seq 1 50); do "$roncho" status --listen "127.0.0.1:$port" "$@" 2>/dev/null | grep -q "^server .*ok" && break; sleep 0.2; done
}

stop_server() { kill -TERM "$pid"; wait "$pid"; pid=""; }

# postgres_args: creates the fresh database and prints the serve flag for it.
postgres_args() {
  psql "$server_url" -qc "CREATE DATABASE $database" >/dev/null
  echo "--database-url=${server_url%/*}/$database"
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
