#!/usr/bin/env bash
# Fuzzes the HTTP API of a real `eddy serve` from its own OpenAPI document
# with schemathesis (from PyPI, into eddy's tool environment): every route,
# with generated bodies, ids and parameters, positive and negative, bounded
# by MAX_EXAMPLES cases per operation and MAX_TIME seconds. Fails on any 5xx
# response, a timeout, or a server that dies. Prints how many requests were
# made.
#
#   scripts/fuzz-api.sh                  # uses the dev build of eddy
#   MAX_EXAMPLES=200 MAX_TIME=600 scripts/fuzz-api.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/serve-lib.sh

MAX_EXAMPLES=${MAX_EXAMPLES:-40}
MAX_TIME=${MAX_TIME:-90}
. scripts/python-env.sh
python_env schemathesis==4.32.5

EDDY=${EDDY:-${CARGO_TARGET_DIR:-target}/debug/eddy}
[ -x "$EDDY" ] || cargo build -q --workspace --bin eddy

server_scratch
mkdir -p "$work/data"
printf '{"k":"a","ts":1}\n' > "$work/data/in.ndjson"
start_server "$EDDY" "$work" --token fuzz

status=0
"$VENV/bin/schemathesis" run "$base/api/v1/openapi.json" \
  --header "Authorization: Bearer fuzz" \
  --checks not_a_server_error \
  --max-examples "$MAX_EXAMPLES" --max-time "$MAX_TIME" \
  --request-timeout 10 --workers 2 --seed 7 \
  --generation-database none \
  --report ndjson --report-ndjson-path "$work/events.ndjson" \
  --no-color > "$work/schemathesis.log" 2>&1 || status=$?
# On a failure, its cases (with a curl line to reproduce each) and the
# server's log; otherwise the summary.
if [ "$status" -ne 0 ]; then
  sed -n '/FAILURES/,$p' "$work/schemathesis.log" | head -n 150
  tail -n 30 "$work/serve.log"
else
  tail -n 25 "$work/schemathesis.log"
fi
echo "fuzz-api: schemathesis exit status $status; $(grep -o '"request"' "$work/events.ndjson" | wc -l) requests made"
if ! kill -0 "$server" 2>/dev/null; then
  echo "fuzz-api: the server died" >&2
  tail -n 20 "$work/serve.log" >&2
  exit 1
fi
exit "$status"
