#!/usr/bin/env bash
# Ingest benchmark: starts a release `roncho serve` in the embedded mode and
# on Postgres (a fresh database), drives it with `roncho-loadtest ingest`, and
# prints one line per mode and RPC. Loopback only; bounded request counts.
#
#   loadtests/run-ingest.sh [extra roncho-loadtest ingest flags]
set -euo pipefail
cd "$(dirname "$0")/.."
port=50971
source loadtests/common.sh

extra=("$@")
echo "# $(date -u +%F) $(nproc) cores; roncho-loadtest ingest ${extra[*]}"
run_loadtest embedded ingest --data-dir "$work/data"
run_loadtest postgres ingest "$(postgres_args)"
