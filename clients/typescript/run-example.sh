#!/usr/bin/env bash
# Generates the TypeScript types from proto/, compiles example.ts and runs
# it against `roncho serve` (started here, embedded, in a temp dir unless
# RONCHO_ADDRESS names a running server).
#
#   clients/typescript/run-example.sh [path/to/roncho]
set -euo pipefail
cd "$(dirname "$0")"
roncho=${1:-${CARGO_TARGET_DIR:-../../target}/debug/roncho}
npm install --no-audit --no-fund --silent
rm -rf generated dist
npx proto-loader-gen-types roncho/v1/ingest.proto roncho/v1/recall.proto roncho/v1/dialectic.proto \
  roncho/v1/deriver.proto --grpcLib=@grpc/grpc-js --outDir=generated --keepCase --longs=String \
  --enums=String --defaults --oneofs --includeDirs=../../proto >/dev/null 2>&1
npx tsc --strict --target es2022 --module es2022 --moduleResolution bundler --skipLibCheck \
  --outDir dist example.ts
if [ -z "${RONCHO_ADDRESS:-}" ]; then
  data=$(mktemp -d)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  RONCHO_EMBEDDING_PROVIDER=none "$roncho" serve --data-dir "$data" --listen "127.0.0.1:$port" --log warn &
  server=$!
  trap 'kill $server 2>/dev/null; rm -rf "$data"' EXIT
  export RONCHO_ADDRESS=127.0.0.1:$port
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
fi
RONCHO_PROTO_DIR=../../proto node dist/example.js
