#!/usr/bin/env bash
# A quick interleaved A/B of two builds' edges, embedded (test hashing
# embedder): for each round, each build in turn serves a fresh data
# directory and gets CreateMessages over REST (1 client) and gRPC
# (1 client), REST with 8 clients (300 batches of 100 each), then 1,000
# REST searches (2 clients). The machine is noisy: read the rounds side by
# side, not one number.
#
#   loadtests/run-rest-ab.sh OLD_BINARY NEW_BINARY [rounds]   (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: run-rest-ab.sh OLD NEW [rounds]}
new=${2:?usage: run-rest-ab.sh OLD NEW [rounds]}
rounds=${3:-2}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/roncho/target}
cargo build --release --locked -p roncho-loadtests
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest
export RONCHO_EMBEDDING_PROVIDER=test-hashing RONCHO_EMBEDDING_DIMENSIONS=384
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
for round in $(seq 1 "$rounds"); do
  for bin in "$old" "$new"; do
    dir=$(mktemp -d)
    grpc=$(free_port)
    rest=$(free_port)
    "$bin" serve --listen "127.0.0.1:$grpc" --rest-listen "127.0.0.1:$rest" --data-dir "$dir/data" --log warn >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$rest/health" >/dev/null && break; sleep 0.2; done
    echo "== round $round: $bin"
    "$loadtest" --target "http://127.0.0.1:$rest" --label "REST, 1 client" rest --batches 300 --concurrency 1
    "$loadtest" --target "http://127.0.0.1:$grpc" --label "gRPC, 1 client" ingest --batches 300 --concurrency 1 --lists 0
    "$loadtest" --target "http://127.0.0.1:$rest" --label "REST, 8 clients" rest --batches 300 --concurrency 8
    "$loadtest" --target "http://127.0.0.1:$rest" --label "REST" rest --batches 0 --queries 1000 --concurrency 2
    kill -TERM "$pid"
    wait "$pid" || true
    rm -rf "$dir"
  done
done
