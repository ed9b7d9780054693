#!/bin/sh
# What `make test` needs outside Python: Debian's chromium, for the browser tests (Playwright drives it and never
# downloads a browser). Present: nothing to do. Missing and root with apt-get: installs it. Otherwise one line
# names the exact command, and the suite goes on (its browser tests then fail, as they must without a browser).
# CFL_CHROMIUM: where the tests look for it (default /usr/bin/chromium, as tools/browser.py).
chromium="${CFL_CHROMIUM:-/usr/bin/chromium}"
[ -x "$chromium" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "chromium is missing at $chromium: installing it (apt-get install -y chromium) for the browser tests"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } ||
    echo "could not install chromium: run 'apt-get update && apt-get install -y chromium' (the browser tests fail without it)"
  exit 0
fi
echo "chromium is missing at $chromium: run 'sudo apt-get install -y chromium' (the browser tests fail without it)"
exit 0
