# Sourced by the browser suites: Debian's Chromium, installed when missing,
# and the pinned npm packages (playwright-core drives it, axe-core checks
# pages). Sets $chromium.
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Chromium from the Debian archive"
  sudo_or_not=""
  [ "$(id -u)" -ne 0 ] && sudo_or_not=sudo
  $sudo_or_not apt-get install -y -q chromium >/dev/null \
    || { $sudo_or_not apt-get update -q >/dev/null && $sudo_or_not apt-get install -y -q chromium >/dev/null; }
fi
npm install --no-audit --no-fund --silent
chromium=$(command -v chromium)
