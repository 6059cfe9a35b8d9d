#!/usr/bin/env bash
# Drives roncho's Honcho v3 REST edge with Honcho's official Python SDK
# (honcho-ai from PyPI, pinned below) through clients/honcho-sdk/scenario.py:
# embedded (SQLite) without an embedder and with the local model (the
# README's configuration), then on Postgres + NATS + Qdrant with the local
# model (every role in one process), then a Honcho database imported with `roncho import
# --from-honcho` and read back, then embedded with API keys, and keys
# minted as Honcho mints them (PyJWT).
#
#   clients/honcho-sdk/run-scenario.sh path/to/roncho
#
# Env: RONCHO_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres),
# RONCHO_TEST_NATS_URL (default nats://127.0.0.1:4222), RONCHO_TEST_QDRANT_URL
# (the distributed mode runs without Qdrant when unset), RONCHO_CACHE (venv).
set -euo pipefail

# The SDK release that matches Honcho 3.0.12's API (every mode below), and
# the newest release (HONCHO_SDK_VERSION=newest: the SDK as users install it
# today, with clients/honcho-sdk/newer.py for what it added since: workspace
# chat, evidence, conclusion get/derived, uid; the embedded and distributed
# modes).
pinned=2.3.0
newest=2.7.0
case ${HONCHO_SDK_VERSION:-pinned} in
  pinned) sdk_version=$pinned ;;
  newest) sdk_version=$newest ;;
  *) sdk_version=$HONCHO_SDK_VERSION ;;
esac
source "$(dirname "$0")/../scenario-lib.sh" "$@"
nats_url=${RONCHO_TEST_NATS_URL:-nats://127.0.0.1:4222}
# PyJWT mints keys as Honcho's tooling does (clients/honcho-sdk/keys.py).
pyjwt_version=2.15.1
venv=$cache/venv-honcho-sdk-$sdk_version

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import honcho, jwt" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "honcho-ai==$sdk_version" "pyjwt==$pyjwt_version"
fi

# Each mode's embedder: none, or the README's default local model
# (scripts/fetch-bge-small.sh), with which embedded search, chat and
# context read the embedded vector store's full-text index instead of FTS5.
model_dir=$("$repo/scripts/fetch-bge-small.sh")
embedder=none
start_server() {
  if [ "$embedder" = local ]; then
    RONCHO_EMBEDDING_PROVIDER=local RONCHO_EMBEDDING_MODEL_DIR=$model_dir start_rest_server "$@"
  else
    RONCHO_EMBEDDING_PROVIDER=none start_rest_server "$@"
  fi
}

passed=0
sdk=$repo/clients/honcho-sdk
# run_mode name serve-args...: starts roncho, runs "${client[@]}" --base-url URL against it, stops it.
run_mode() {
  local name=$1; shift
  echo "== $name"
  start_server "$@"
  local semantic=()
  [ "$embedder" = local ] && semantic=(--semantic)
  "$venv/bin/python" "${client[@]}" "${semantic[@]}" --base-url "$base_url" || { tail -30 "$work/server.log"; exit 1; }
  stop_server
  passed=$((passed + 1))
}

client=("$sdk/scenario.py")
[ "$sdk_version" != "$pinned" ] && client=("$sdk/newer.py")
run_mode embedded --data-dir "$work/data"
embedder=local run_mode "embedded with the local model" --data-dir "$work/data-model"

database=roncho_honcho_sdk_$$_$RANDOM
psql "$server_url" -qc "CREATE DATABASE $database" >/dev/null
distributed=(--database-url "${server_url%/*}/$database" --nats-url "$nats_url")
if [ -n "${RONCHO_TEST_QDRANT_URL:-}" ]; then
  export RONCHO_QDRANT_COLLECTION=honcho_sdk_$$_$RANDOM
  distributed+=(--qdrant-url "$RONCHO_TEST_QDRANT_URL")
fi
embedder=local RONCHO_NATS_PREFIX=honcho_sdk_$$_$RANDOM \
  run_mode "postgres + nats${RONCHO_TEST_QDRANT_URL:+ + qdrant} with the local model" "${distributed[@]}"
if [ "$sdk_version" != "$pinned" ]; then
  echo "honcho-sdk $sdk_version modes: $passed passed, 0 failed"
  exit 0
fi

# A Honcho database (bin/roncho/tests/honcho-v3-database.sql) imported
# twice with `roncho import --from-honcho` (the second adds nothing), then
# read back through the SDK.
honcho_database=roncho_honcho_import_$$_$RANDOM
databases+=("$honcho_database")
psql "$server_url" -qc "CREATE DATABASE $honcho_database" >/dev/null
psql "${server_url%/*}/$honcho_database" -q -v ON_ERROR_STOP=1 \
  -f "$repo/bin/roncho/tests/honcho-v3-database.sql" >/dev/null
for run in first again; do
  "$roncho_bin" import --from-honcho "${server_url%/*}/$honcho_database" --data-dir "$work/data-import" \
    --log warn >"$work/import-$run.txt"
  cat "$work/import-$run.txt"
done
grep -Eq '^messages +0 +5 ' "$work/import-again.txt" || { echo "a second import was not a no-op"; exit 1; }
client=("$sdk/imported.py")
run_mode "imported from Honcho" --data-dir "$work/data-import"

secret=$(openssl rand -hex 32)
export RONCHO_AUTH_JWT_SECRET=$secret
client=("$sdk/scenario.py" --api-key "$("$roncho_bin" keys create --admin)")
run_mode "embedded with keys" --data-dir "$work/data-keys"

# Keys minted as Honcho's tooling mints them, and roncho's keys as Honcho verifies them.
client=("$sdk/keys.py" --secret "$secret" --workspace acme
  --roncho-key "$("$roncho_bin" keys create --workspace acme --expires-in 1h)")
run_mode "keys across Honcho and roncho" --data-dir "$work/data-keys"
echo "honcho-sdk $sdk_version modes: $passed passed, 0 failed"
