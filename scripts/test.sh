#!/usr/bin/env bash
# eddy's test command (the README's quick start and CI call this).
# Unit tests, file-driven SQL tests with goldens, differential tests against
# DataFusion batch queries, the reference pipeline golden, CLI tests, and the
# recovery tests (real processes killed with SIGKILL and restarted), the
# server's API tests over real HTTP, a fuzz run of that API, and the web
# console in a real browser.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked "$@"

EDDY="${CARGO_TARGET_DIR:-target}/debug/eddy"
export EDDY
# The HTTP API fuzzed from its own OpenAPI document (schemathesis, bounded).
MAX_TIME="${FUZZ_SECONDS:-60}" scripts/fuzz-api.sh
# The web console in headless Chromium against a real server.
scripts/web-test.sh
