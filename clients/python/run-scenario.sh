#!/usr/bin/env bash
# Generates the Python client from proto/ and runs clients/python/scenario.py
# against `roncho serve` in the embedded mode (without an embedder, and with
# the local model as the README installs it), on Postgres, and embedded over
# TLS with API keys (certificates from openssl, the key from `roncho keys
# create`): each mode is written, restarted and verified; the transcripts must
# be identical.
#
#   clients/python/run-scenario.sh path/to/roncho
#
# Env: RONCHO_TEST_DATABASE_URL (Postgres server, default
# postgres://postgres@127.0.0.1:5432/postgres), RONCHO_CACHE (venv location).
set -euo pipefail

source "$(dirname "$0")/../scenario-lib.sh" "$@"
venv=$cache/venv-python-client

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import grpc_tools, grpc_status" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q grpcio==1.85.1 grpcio-tools==1.85.1 grpcio-status==1.85.1
fi

mkdir -p "$work/gen"
"$venv/bin/python" -m grpc_tools.protoc -I "$repo/proto" --python_out="$work/gen" --grpc_python_out="$work/gen" "$repo"/proto/roncho/v1/*.proto

start_server() { # mode args...
  local port; port=$(free_port)
  target=127.0.0.1:$port
  # Full-text search only, and no deriver worker: the transcript must not depend
  # on when vectors sync or when background derivation adds conclusions.
  RONCHO_EMBEDDING_PROVIDER=${embedding_provider:-none} "$roncho_bin" serve --listen "$target" \
    --roles ingest,recall,dialectic,dreamer,reconciler "$@" >>"$work/server.log" 2>&1 &
  server_pid=$!
}

scenario() { PYTHONPATH="$work/gen" "$venv/bin/python" "$repo/clients/python/scenario.py" --target "$target" "${client_args[@]}" "$@"; }
client_args=()

passed=0
run_mode() { # name serve-args...
  local name=$1; shift
  echo "== $name"
  start_server "$@"
  scenario --phase write --out "$work/$name.json" || { tail -30 "$work/server.log"; exit 1; }
  stop_server
  start_server "$@"
  scenario --phase verify --out "$work/$name.json" || { tail -30 "$work/server.log"; exit 1; }
  stop_server
  passed=$((passed + 2))
}

run_mode embedded --data-dir "$work/data"
# The README's configuration: the local model installed (search is hybrid,
# the embedded vector store ranks words, and chat reads it too).
export RONCHO_EMBEDDING_MODEL_DIR
RONCHO_EMBEDDING_MODEL_DIR=$("$repo/scripts/fetch-bge-small.sh")
embedding_provider=local
client_args=(--semantic)
run_mode embedded-model --data-dir "$work/data-model"
embedding_provider=none
client_args=()
database=roncho_pyclient_$$_$RANDOM
psql "$server_url" -qc "CREATE DATABASE $database" >/dev/null
run_mode postgres --database-url "${server_url%/*}/$database"

# TLS and API keys: a CA, a server certificate for 127.0.0.1 signed by it,
# a secret, and an admin key minted by `roncho keys create`.
tls=$work/tls
"$repo/scripts/make-test-certs.sh" "$tls"
secret=$(openssl rand -hex 32)
admin_key=$(RONCHO_AUTH_JWT_SECRET=$secret "$roncho_bin" keys create --admin)
client_args=(--ca-file "$tls/ca.pem" --key "$admin_key")
export RONCHO_AUTH_JWT_SECRET=$secret
run_mode embedded-tls --data-dir "$work/data-tls" --tls-cert-file "$tls/server.pem" --tls-key-file "$tls/server.key"
unset RONCHO_AUTH_JWT_SECRET

transcript() { "$venv/bin/python" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["scenario"], indent=1, sort_keys=True))' "$1"; }
if ! diff -u <(transcript "$work/embedded.json") <(transcript "$work/embedded-tls.json"); then
  echo "the transcript over TLS with a key differs from the plain one"
  echo "$passed passed, 1 failed"
  exit 1
fi
passed=$((passed + 1))

if ! diff -u <("$venv/bin/python" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["scenario"], indent=1, sort_keys=True))' "$work/embedded.json") \
             <("$venv/bin/python" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["scenario"], indent=1, sort_keys=True))' "$work/postgres.json"); then
  echo "embedded and postgres transcripts differ"
  echo "$passed passed, 1 failed"
  exit 1
fi
passed=$((passed + 1))
echo "python-client: $passed passed, 0 failed"
