#!/usr/bin/env bash
# Replays the attacks against the release build with keys on, and prints
# what held (loadtests/attack.py): webhook spellings of loopback against a
# listener on it, malformed and deeply nested protobuf, half-open
# connections on the REST and gRPC listeners (RSS before, during, after),
# slow bodies from one workspace's key while another workspace works, every
# connection stage left unfinished, 100,000 health Watch streams (RSS
# before, during, after), TestWebhook floods, a retry after an erasure, and
# a scan of the data directory for erased text. The browser's attacks are
# clients/browser/run-attack.sh's (a real Chromium), the neighbours' and
# the proxy's bin/roncho/tests/e2e/boundaries.rs.
# Exits 1 when anything got through. Loopback only: the flood comes from
# 127.0.0.2.. so that the checks from 127.0.0.1 are another client.
#
#   loadtests/run-attack.sh [connections]     (default 20000 half-open)
set -euo pipefail
cd "$(dirname "$0")/.."
source loadtests/common.sh
connections=${1:-20000}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
grpc_port=$(free_port)
rest_port=$(free_port)

venv=${RONCHO_CACHE:-$HOME/.cache/roncho}/venv-python-client
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import grpc, grpc_health" 2>/dev/null; then
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q grpcio==1.85.1 grpcio-tools==1.85.1 grpcio-status==1.85.1 grpcio-health-checking==1.85.1
fi

# Short enough body timeout for the run to take a minute; the others at their defaults.
body_timeout=10
export RONCHO_AUTH_JWT_SECRET
RONCHO_AUTH_JWT_SECRET=$(openssl rand -hex 32)
export RONCHO_EMBEDDING_PROVIDER=none RONCHO_REQUEST_BODY_TIMEOUT_SECS=$body_timeout RONCHO_LOG=warn
admin=$("$roncho" keys create --admin)
loud=$("$roncho" keys create --workspace loud)
quiet=$("$roncho" keys create --workspace quiet)

# The attacker opens tens of thousands of sockets; the server raises its own limit.
ulimit -n "$(ulimit -Hn)"
"$roncho" serve --listen "127.0.0.1:$grpc_port" --rest-listen "127.0.0.1:$rest_port" --data-dir "$work/data" \
  >"$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$rest_port/health" >/dev/null && break; sleep 0.2; done
echo "roncho $("$roncho" --version 2>/dev/null || true) pid $pid: gRPC 127.0.0.1:$grpc_port, REST 127.0.0.1:$rest_port," \
  "$connections half-open connections"
"$venv/bin/python" loadtests/attack.py --grpc "127.0.0.1:$grpc_port" --rest "http://127.0.0.1:$rest_port" \
  --admin "$admin" --loud "$loud" --quiet "$quiet" --data-dir "$work/data" --pid "$pid" \
  --connections "$connections" --body-timeout "$body_timeout" --header-timeout 10 \
  || { tail -20 "$work/server.log"; exit 1; }
