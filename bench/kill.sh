#!/usr/bin/env bash
# Recovery under fire: the kill tests of tests/recovery.rs with KILLS SIGKILLs
# each (default 100): the reference pipeline over generated NDJSON inputs and
# a windows + join job on the generator writing Parquet, each killed at
# seeded random moments and restarted with the same --state-dir and --output;
# every round's final output is checked against an uninterrupted run's.
# Prints, per job, the kills, rounds and the checkpoints the restarts
# resumed from.
#
#   bench/kill.sh            # 100 kills per job (about 6 minutes on 2 cores)
#   KILLS=30 bench/kill.sh
set -euo pipefail
cd "$(dirname "$0")/.."

KILLS=${KILLS:-100}
export EDDY_KILLS=$KILLS
cargo test -q --workspace --test recovery -- kills --nocapture --test-threads 1 2>&1 \
  | grep -E "kills in|test result|panicked|differs"
