#!/usr/bin/env bash
# The web console in real browsers against a real `eddy serve`
# (tests/web/console.test.mjs): Debian's Chromium driven by playwright-core,
# and Debian's Firefox ESR driven by puppeteer-core over WebDriver BiDi, both
# headless. Installs what it needs on first use: the `chromium` and
# `firefox-esr` packages (apt) and the two npm packages as
# tests/web/package-lock.json pins them (into a cache directory outside the
# clone). Saves a screenshot of every screen under
# WEB_TEST_OUT (default $CARGO_TARGET_DIR/web-test) and fails on any console
# error. BROWSERS="chromium" runs one.
#
#   scripts/web-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/serve-lib.sh

BROWSERS=${BROWSERS:-chromium firefox}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
FIREFOX=${FIREFOX:-/usr/bin/firefox-esr}
sudo_if_needed() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
missing=""
[ -x "$CHROMIUM" ] || missing="$missing chromium"
[ -x "$FIREFOX" ] || missing="$missing firefox-esr"
if [ -n "$missing" ]; then
  echo "web-test: installing Debian's$missing" >&2
  sudo_if_needed apt-get update -qq
  # shellcheck disable=SC2086
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
# The browser drivers, exactly as tests/web/package-lock.json pins them
# (versions and integrity hashes), installed with `npm ci` into a cache
# directory outside the clone, again whenever the lockfile changes.
NODE_DIR=${EDDY_NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eddy-node}
if ! cmp -s tests/web/package-lock.json "$NODE_DIR/package-lock.json" || [ ! -d "$NODE_DIR/node_modules" ]; then
  echo "web-test: installing the browser drivers pinned by tests/web/package-lock.json" >&2
  mkdir -p "$NODE_DIR"
  cp tests/web/package.json tests/web/package-lock.json "$NODE_DIR/"
  (cd "$NODE_DIR" && npm ci --silent --no-audit --no-fund --engine-strict=false >/dev/null)
fi

EDDY=${EDDY:-${CARGO_TARGET_DIR:-target}/debug/eddy}
[ -x "$EDDY" ] || cargo build -q --workspace --bin eddy
OUT=${WEB_TEST_OUT:-${CARGO_TARGET_DIR:-target}/web-test}
mkdir -p "$OUT"

server_scratch
start_server "$EDDY" "$work" --checkpoint-interval 1s --allow-python-udfs

for browser in $BROWSERS; do
  case $browser in
    chromium) executable=$CHROMIUM ;;
    firefox) executable=$FIREFOX ;;
    *) echo "web-test: unknown browser $browser" >&2; exit 2 ;;
  esac
  if ! NODE_MODULES="$NODE_DIR/node_modules" node tests/web/console.test.mjs "$base" "$OUT" "$browser" "$executable"; then
    echo "web-test ($browser): failed; eddy serve's log ends:" >&2
    tail -n 60 "$work/serve.log" >&2
    exit 1
  fi
done
echo "web-test: screenshots in $OUT"
