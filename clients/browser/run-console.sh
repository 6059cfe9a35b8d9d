#!/usr/bin/env bash
# The console's journeys in a real headless Chromium (Debian's, installed
# here when missing) against `roncho serve` on the embedded default, with
# the local model when RONCHO_TEST_EMBED_MODEL_DIR names it (the README's
# default once the model is installed), else without one; the main ones
# again on Postgres + NATS when RONCHO_TEST_DATABASE_URL and
# RONCHO_TEST_NATS_URL are set. Exits 1 when a journey, an accessibility
# check or a console error fails.
#
#   clients/browser/run-console.sh [path/to/roncho]
set -euo pipefail
cd "$(dirname "$0")"
roncho=$(realpath "${1:-${CARGO_TARGET_DIR:-../../target}/debug/roncho}")
source ./chromium.sh
# The main journeys again on Postgres and NATS, when the suite has them: a
# database of their own, dropped at the end.
if [ -n "${RONCHO_TEST_DATABASE_URL:-}" ] && [ -n "${RONCHO_TEST_NATS_URL:-}" ]; then
  database=roncho_console_$$
  psql "$RONCHO_TEST_DATABASE_URL" -qc "CREATE DATABASE $database" >/dev/null
  trap 'psql "$RONCHO_TEST_DATABASE_URL" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null' EXIT
  export RONCHO_CONSOLE_DATABASE_URL=${RONCHO_TEST_DATABASE_URL%/*}/$database
  export RONCHO_CONSOLE_NATS_URL=$RONCHO_TEST_NATS_URL
fi
node console.mjs "$roncho" "$chromium" ${RONCHO_TEST_EMBED_MODEL_DIR:+"$RONCHO_TEST_EMBED_MODEL_DIR"}
