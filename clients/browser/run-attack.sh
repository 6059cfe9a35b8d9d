#!/usr/bin/env bash
# Pages of other origins, in a real headless Chromium (Debian's, installed
# here when missing), try to write into and read the memory of a zero-setup
# `roncho serve`: simple requests (text/plain, no-cors, a form, a beacon),
# CORS requests, and a DNS-rebinding name pointed at loopback. Exits 1 when
# any of them gets through. docs/security.md, "Browsers and other local
# parties", says what it shows.
#
#   clients/browser/run-attack.sh [path/to/roncho]
set -euo pipefail
cd "$(dirname "$0")"
roncho=$(realpath "${1:-${CARGO_TARGET_DIR:-../../target}/debug/roncho}")
source ./chromium.sh
node attack.mjs "$roncho" "$chromium"
