#!/usr/bin/env bash
# Drives roncho's MCP server with the official Python MCP client (PyPI mcp,
# pinned below) through clients/mcp/scenario.py, checking the tools' results
# against the gRPC API's view of the same data:
#   - over Streamable HTTP (`/mcp`, `/mcp/memory` on the REST edge) and over
#     stdio (`roncho mcp --addr`), against `roncho serve` embedded, then on
#     Postgres + NATS (+ Qdrant when RONCHO_TEST_QDRANT_URL is set); the
#     conversation also embedded without an embedder;
#   - `roncho mcp` with no flags (embedded in its process, on a fresh
#     $XDG_DATA_HOME/roncho);
#   - with API keys: a key of alice's, over HTTP and stdio, reads hers and is
#     refused bob's through every tool; no key is 401.
# Every mode embeds with the local model (the README's configuration). Chat
# goes to a scripted OpenAI-compatible model (loadtests/scripted_llm.py
# --answer --search-first: it calls search_messages before answering).
#
#   clients/mcp/run-scenario.sh path/to/roncho
set -euo pipefail

mcp_version=2.3.0
source "$(dirname "$0")/../scenario-lib.sh" "$@"
nats_url=${RONCHO_TEST_NATS_URL:-nats://127.0.0.1:4222}
venv=$cache/venv-mcp-$mcp_version
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import mcp, grpc_tools" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "mcp==$mcp_version" grpcio==1.85.1 grpcio-tools==1.85.1 grpcio-status==1.85.1
fi
mkdir -p "$work/gen"
"$venv/bin/python" -m grpc_tools.protoc -I "$repo/proto" --python_out="$work/gen" --grpc_python_out="$work/gen" \
  "$repo"/proto/roncho/v1/*.proto
scenario() { PYTHONPATH="$work/gen" "$venv/bin/python" "$repo/clients/mcp/scenario.py" --model-log "$work/model.jsonl" "$@"; }

answer=$("$venv/bin/python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import scenario; print(scenario.ANSWER)' "$repo/clients/mcp")
model_port=$(free_port)
"$venv/bin/python" "$repo/loadtests/scripted_llm.py" --latency 0 --port "$model_port" --answer "$answer" \
  --search-first --log "$work/model.jsonl" >/dev/null &
model_pid=$!
trap 'kill $model_pid 2>/dev/null || true; cleanup' EXIT
export RONCHO_LLM_BASE_URL=http://127.0.0.1:$model_port/v1 RONCHO_DIALECTIC_MODEL=scripted RONCHO_LLM_API_KEY=none
# Conclusions are queried by meaning: the README's local model
# (scripts/fetch-bge-small.sh), with which the embedded vector store ranks
# words too and the dialectic's tools read it.
export RONCHO_EMBEDDING_PROVIDER=local
RONCHO_EMBEDDING_MODEL_DIR=$("$repo/scripts/fetch-bge-small.sh")
export RONCHO_EMBEDDING_MODEL_DIR

start_server() { start_rest_server "$@"; }

passed=0
# served name serve-args...: the conversation over HTTP and over stdio, and the memory profile.
served() {
  local name=$1; shift
  echo "== $name"
  start_server "$@"
  scenario --url "$base_url/mcp" --grpc "$grpc" --part conversation --workspace http-conv || { tail -30 "$work/server.log"; exit 1; }
  scenario --stdio "$roncho_bin mcp --addr $base_url" --grpc "$grpc" --part conversation --workspace stdio-conv \
    || { tail -30 "$work/server.log"; exit 1; }
  scenario --url "$base_url/mcp/memory" --grpc "$grpc" --part memory --workspace http-memory || { tail -30 "$work/server.log"; exit 1; }
  stop_server
  passed=$((passed + 3))
}

served "embedded: HTTP and stdio" --data-dir "$work/data"

echo "== embedded without an embedder: full text, chat reading FTS5 (HTTP)"
RONCHO_EMBEDDING_PROVIDER=none start_server --data-dir "$work/data-words"
scenario --url "$base_url/mcp" --grpc "$grpc" --part conversation --workspace words-conv --expect-degraded \
  || { tail -30 "$work/server.log"; exit 1; }
stop_server
passed=$((passed + 1))

database=roncho_mcp_$$_$RANDOM
psql "$server_url" -qc "CREATE DATABASE $database" >/dev/null
distributed=(--database-url "${server_url%/*}/$database" --nats-url "$nats_url")
if [ -n "${RONCHO_TEST_QDRANT_URL:-}" ]; then
  export RONCHO_QDRANT_COLLECTION=mcp_$$_$RANDOM
  distributed+=(--qdrant-url "$RONCHO_TEST_QDRANT_URL")
fi
RONCHO_NATS_PREFIX=mcp_$$_$RANDOM served "postgres + nats${RONCHO_TEST_QDRANT_URL:+ + qdrant}" "${distributed[@]}"

echo "== roncho mcp with no flags: embedded, its memory in a fresh \$XDG_DATA_HOME/roncho (stdio)"
XDG_DATA_HOME=$work/xdg scenario --stdio "$roncho_bin mcp" --part conversation --workspace alone
[ -f "$work/xdg/roncho/roncho.db" ] || { echo "roncho mcp kept no store in \$XDG_DATA_HOME/roncho"; exit 1; }
# Without an embedder: recall says it matched by words only.
XDG_DATA_HOME=$work/xdg RONCHO_EMBEDDING_PROVIDER=none scenario --stdio "$roncho_bin mcp --profile memory" \
  --part memory --workspace alone-words --expect-degraded
passed=$((passed + 2))

echo "== keys: alice's key reads hers, never bob's"
secret=$(openssl rand -hex 32)
export RONCHO_AUTH_JWT_SECRET=$secret
admin=$("$roncho_bin" keys create --admin)
alice=$("$roncho_bin" keys create --workspace keyed --peer alice)
start_server --data-dir "$work/data-keys"
status=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$base_url/mcp" -H 'content-type: application/json' \
  -H 'accept: application/json, text/event-stream' -d '{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
[ "$status" = 401 ] || { echo "/mcp without a key answered $status, not 401"; exit 1; }
scenario --url "$base_url/mcp" --key "$admin" --part seed --workspace keyed
scenario --url "$base_url/mcp" --key "$alice" --default-workspace keyed --part peer-key --workspace keyed \
  || { tail -30 "$work/server.log"; exit 1; }
scenario --stdio "$roncho_bin mcp --addr $base_url" --key "$alice" --part peer-key --workspace keyed \
  || { tail -30 "$work/server.log"; exit 1; }
scenario --url "$base_url/mcp/memory" --key "$alice" --part memory-peer-key --workspace keyed \
  || { tail -30 "$work/server.log"; exit 1; }
stop_server
passed=$((passed + 4))
echo "mcp scenarios: $passed passed, 0 failed"
