#!/usr/bin/env bash
# The console's journeys in a real headless Chromium (Debian's, installed
# here when missing) against `roncho serve` on the embedded default: with
# the local model when RONCHO_TEST_EMBED_MODEL_DIR names it (the README's
# default once the model is installed), else without one. Exits 1 when a
# journey, an accessibility check or a console error fails.
#
#   clients/browser/run-console.sh [path/to/roncho]
set -euo pipefail
cd "$(dirname "$0")"
roncho=$(realpath "${1:-${CARGO_TARGET_DIR:-../../target}/debug/roncho}")
source ./chromium.sh
node console.mjs "$roncho" "$chromium" ${RONCHO_TEST_EMBED_MODEL_DIR:+"$RONCHO_TEST_EMBED_MODEL_DIR"}
