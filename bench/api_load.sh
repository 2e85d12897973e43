#!/usr/bin/env bash
# Load on `eddy serve`: CLIENTS concurrent clients for DURATION seconds, each
# looping over submit a job (3M generated rows), tail 100 of its rows over
# SSE, poll GET /api/v1/jobs/{id} while it runs, delete it. Prints requests,
# errors, the GET latency percentiles and the server's memory (current and
# peak RSS). Loopback only.
#
#   bench/api_load.sh                        # 20 clients, 60 s, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/api_load.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/serve-lib.sh

CLIENTS=${CLIENTS:-20}
DURATION=${DURATION:-60}
. bench/lib.sh
build_eddy

server_scratch
start_server "$EDDY" "$work"

result=$("$EDDY" bench api --server "$base" --clients "$CLIENTS" --seconds "$DURATION")
echo "load:   $result"
echo "server: $(grep -E 'VmRSS|VmHWM' /proc/$server/status | tr -s ' \t' ' ' | tr '\n' ' ')"
