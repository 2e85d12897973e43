#!/usr/bin/env bash
# The web console in a real browser: Debian's Chromium, headless, driven by
# playwright-core from npm, against a real `eddy serve` (tests/web/console.test.mjs).
# Installs what it needs on first use: the `chromium` package (apt) and
# playwright-core (npm, into a cache directory outside the clone). Saves a
# screenshot of every screen under WEB_TEST_OUT (default
# $CARGO_TARGET_DIR/web-test) and fails on any console error.
#
#   scripts/web-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/serve-lib.sh

PLAYWRIGHT_VERSION=1.64.1
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
  echo "web-test: installing Debian's chromium" >&2
  sudo_if_needed() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
NODE_DIR=${EDDY_NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eddy-node}
if [ "$(node -p "try { require('$NODE_DIR/node_modules/playwright-core/package.json').version } catch (e) { '' }")" != "$PLAYWRIGHT_VERSION" ]; then
  echo "web-test: installing playwright-core $PLAYWRIGHT_VERSION" >&2
  mkdir -p "$NODE_DIR"
  (cd "$NODE_DIR" && npm install --silent --no-audit --no-fund --no-save "playwright-core@$PLAYWRIGHT_VERSION" >/dev/null)
fi

EDDY=${EDDY:-${CARGO_TARGET_DIR:-target}/debug/eddy}
[ -x "$EDDY" ] || cargo build -q -p eddy-cli
OUT=${WEB_TEST_OUT:-${CARGO_TARGET_DIR:-target}/web-test}
mkdir -p "$OUT"

work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
start_server "$EDDY" "$work" --checkpoint-interval 1s

PLAYWRIGHT_DIR="$NODE_DIR/node_modules" CHROMIUM="$CHROMIUM" node tests/web/console.test.mjs "$base" "$OUT"
echo "web-test: screenshots in $OUT"
