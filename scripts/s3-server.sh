#!/usr/bin/env bash
# The S3-compatible object store eddy's bucket tests and benchmarks run
# against: s3s-fs (an S3 service over a local directory; each top-level
# directory of ROOT is a bucket), built from crates.io at a pinned version
# with its own lockfile (cargo install --locked) into eddy's tool cache
# (EDDY_TOOLS, default ~/.cache/eddy-tools) on first use.
#
#   scripts/s3-server.sh path                  prints the server binary's path
#   scripts/s3-server.sh start PORT ROOT       serves ROOT on 127.0.0.1:PORT (foreground)
#
# The server takes the access key "eddy" and the secret key "eddy-secret";
# clients set AWS_ENDPOINT_URL=http://127.0.0.1:PORT, AWS_ALLOW_HTTP=true,
# AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION=us-east-1.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.14.1
TOOLS=${EDDY_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/eddy-tools}
ROOT_DIR="$TOOLS/s3s-fs-$VERSION"
BIN="$ROOT_DIR/bin/s3s-fs"
if [ ! -x "$BIN" ]; then
  mkdir -p "$TOOLS"
  # One installer at a time (tests may call this concurrently).
  exec 9>"$TOOLS/s3s-fs.lock"
  flock 9
  if [ ! -x "$BIN" ]; then
    echo "installing s3s-fs $VERSION into $ROOT_DIR (once)" >&2
    CARGO_TARGET_DIR="$TOOLS/s3s-fs-target" cargo install --quiet --locked \
      "s3s-fs@$VERSION" --features binary --root "$ROOT_DIR" >&2
    rm -rf "$TOOLS/s3s-fs-target"
  fi
  flock -u 9
fi
case "${1:-path}" in
  path) echo "$BIN" ;;
  start)
    port=${2:?usage: s3-server.sh start PORT ROOT}
    root=${3:?usage: s3-server.sh start PORT ROOT}
    mkdir -p "$root"
    exec "$BIN" --host 127.0.0.1 --port "$port" --access-key eddy --secret-key eddy-secret "$root" ;;
  *) echo "usage: s3-server.sh path | start PORT ROOT" >&2; exit 2 ;;
esac
