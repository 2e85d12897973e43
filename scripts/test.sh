#!/usr/bin/env bash
# eddy's test command (the README's quick start and CI call this).
# Unit tests, file-driven SQL tests with goldens, differential tests against
# DataFusion batch queries, the reference pipeline golden and CLI tests.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked "$@"
