# Sourced by the client scenarios (clients/*/run-scenario.sh): the work
# directory, a roncho server's lifecycle and clean-up at exit.
#
#   roncho_bin, repo, cache, server_url, work   set from the script's arguments
#   free_port                                   prints a free loopback port
#   start_rest_server serve-args...             every role, gRPC (grpc) and REST (base_url) on free ports; waits for REST
#   stop_server                                 SIGTERM; fails if roncho exits badly
#   database, databases (an array)              dropped at exit when set

roncho_bin=$(realpath "${1:?usage: run-scenario.sh path/to/roncho}")
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${RONCHO_CACHE:-$HOME/.cache/roncho}
server_url=${RONCHO_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
work=$(mktemp -d)
server_pid=""
databases=()

cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  local name
  for name in ${database:-} "${databases[@]}"; do
    psql "$server_url" -qc "DROP DATABASE IF EXISTS $name WITH (FORCE)" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_rest_server() {
  local rest
  grpc=127.0.0.1:$(free_port)
  rest=$(free_port)
  base_url=http://127.0.0.1:$rest
  "$roncho_bin" serve --listen "$grpc" --rest-listen "127.0.0.1:$rest" "$@" >>"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do
    curl -sf "$base_url/health" >/dev/null 2>&1 && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.2
  done
  echo "roncho did not start"; tail -30 "$work/server.log"; exit 1
}

stop_server() {
  kill -TERM "$server_pid"
  wait "$server_pid" || { echo "roncho exited with an error on SIGTERM"; tail -20 "$work/server.log"; exit 1; }
  server_pid=""
}
