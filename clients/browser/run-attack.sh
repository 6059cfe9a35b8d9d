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
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Chromium from the Debian archive"
  sudo_or_not=""
  [ "$(id -u)" -ne 0 ] && sudo_or_not=sudo
  $sudo_or_not apt-get install -y -q chromium >/dev/null \
    || { $sudo_or_not apt-get update -q >/dev/null && $sudo_or_not apt-get install -y -q chromium >/dev/null; }
fi
npm install --no-audit --no-fund --silent
node attack.mjs "$roncho" "$(command -v chromium)"
