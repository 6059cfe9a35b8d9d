# Shared by run-honcho-workload.sh and run-hot-path.sh: the two builds and
# the rounds and backends given as arguments, the Honcho workload client
# (../shared/bench/honcho_workload.py) and a virtualenv with httpx for it,
# a scratch directory, and stopping the one server running at a time.
# Source it after `cd` to the repository root, with `usage` set and the
# script's arguments.
old=${1:?usage: $usage}
new=${2:?usage: $usage}
rounds=${3:-2}
backends=${4:-embedded postgres}
workload=${RONCHO_HONCHO_WORKLOAD:-../shared/bench/honcho_workload.py}
[ -f "$workload" ] || { echo "no workload at $workload (RONCHO_HONCHO_WORKLOAD)" >&2; exit 1; }
server_url=${RONCHO_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
venv=${RONCHO_CACHE:-$HOME/.cache/roncho}/venv-workload
if ! "$venv/bin/python" -c "import httpx" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q httpx==0.28.1
fi
work=$(mktemp -d)
server=""
stop() {
  [ -z "$server" ] || { kill -TERM "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; }
  server=""
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
