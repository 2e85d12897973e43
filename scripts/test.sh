#!/usr/bin/env bash
# eddy's test command (the README's quick start and CI call this).
# Unit tests, file-driven SQL tests with goldens, the Flink/Arroyo
# compatibility suite, differential tests against DataFusion batch queries, the reference pipeline golden, CLI tests, and the
# recovery tests (real processes killed with SIGKILL and restarted), the
# server's API tests over real HTTP, its PostgreSQL port with psql and a driver, fuzz runs of the NDJSON decoder, the SQL
# front end and the HTTP API, the reference pipeline's Parquet read by DuckDB
# and pyarrow, file sinks, sources and checkpoints on a real S3-compatible
# server (s3s-fs), the web console in real browsers, the SQL shell in a real
# terminal, and the benchmark drivers at a small size (against DataFusion
# batch and Apache Flink, their outputs checked).
set -euo pipefail
cd "$(dirname "$0")/.."
# psql for the PostgreSQL-protocol tests (Debian's client, installed if missing).
scripts/postgres.sh client
cargo test --workspace --locked "$@"

# The compatibility suite's expected outputs, worked out from its inputs
# independently of eddy (plain python3, no packages).
python3 tests/compat/check_expected.py

EDDY="${CARGO_TARGET_DIR:-target}/debug/eddy"
export EDDY
# NDJSON decoding and the SQL front end fuzzed (bounded; a fixed seed here,
# a fresh one each time the script runs on its own).
FUZZ_SECONDS="${INPUT_FUZZ_SECONDS:-20}" SEED="${SEED:-1}" scripts/fuzz.sh
# The HTTP API fuzzed from its own OpenAPI document (schemathesis, bounded).
MAX_TIME="${FUZZ_SECONDS:-60}" scripts/fuzz-api.sh
# The reference pipeline's Parquet read by DuckDB and pyarrow.
scripts/parquet-check.sh
# The web console in headless Chromium and Firefox against a real server.
scripts/web-test.sh
# The SQL shell in a real terminal (tmux).
scripts/shell-test.sh
# The benchmarks' by-value comparison of two engines' outputs, itself tested.
python3 bench/test_compare_outputs.py
# eddy against DataFusion batch on the window, hop, join and OVER queries at a
# small size, so the script cannot rot: it fails when the engines' results
# differ (written results by value, the rest by row count).
ROWS=20000 RUNS=1 bench/datafusion.sh
# The whole reference pipeline against DataFusion's batch form of its
# stages 10-30 (fails when the shared stages' rows differ by value).
EVENTS=100000 RUNS=1 bench/pipeline.sh
# The Nexmark benchmark driver at a small size, so it cannot rot (its
# queries' results are checked by tests/nexmark.rs).
EVENTS=20000 RUNS=1 bench/nexmark.sh
# eddy and Apache Flink 1.20 side by side (PyFlink in a virtual environment
# of its own, Java 17) at a small size, so the scripts cannot rot: they fail
# when the engines' final rows differ by value (bench/compare_outputs.py).
# All five queries of flink.sh, over NDJSON files and over rows both
# engines generate in process (datagen); of Nexmark a pass-through, a
# hopping-window join, a tumbling window join, an updating top-1, the file
# sink, and the last bid per key (compared on its key and time).
ROWS=20000 RUNS=1 bench/flink.sh
QUERIES="q0 q5 q7 q9 q10 q18" EVENTS=20000 RUNS=1 bench/nexmark_flink.sh
# Both engines fed live from Kafka topics (the window and the interval
# join), latency measured: fails when their results differ by value.
RATES=20000 SECONDS_TO_RUN=6 bench/kafka_flink.sh
# State past memory on both: eddy spilling under a tenth of its state
# against Flink with RocksDB (and both in memory), the per-key GROUP BY and
# the LEFT join: fails when their results differ by value.
EVENTS=50000 KEYS=10000 RUNS=1 bench/spill_flink.sh
# The Delta-vs-Parquet sink benchmark at a small size, so it cannot rot (it
# fails when the sinks write different row counts).
EVENTS=20000 RUNS=1 CHECKPOINT=200ms bench/delta.sh
# Sinks and checkpoints on the S3-compatible server against the local disk,
# at a small size, so the script cannot rot (it fails when a sink writes
# different row counts on the two).
EVENTS=20000 RUNS=1 CHECKPOINT=200ms bench/object_storage.sh
# Operator chaining on and off at a small size, so the script cannot rot (it
# fails when the reference pipeline writes different lines either way).
ROWS=20000 EVENTS=20000 RUNS=1 LIVE_SECONDS=2 bench/chaining.sh
# Many live jobs on one server, chained and unchained, at a small size.
JOBS=5 WARMUP=1 MEASURE=2 LATENCY=3 bench/server_load.sh
# The same with whole reference pipelines, their device metrics' latency
# read from the generators' reports.
JOB=reference JOBS=2 WARMUP=1 MEASURE=2 LATENCY=8 bench/server_load.sh
# Each job's share of the pool, split between jobs and between tasks.
MEASURE=2 bench/pool_share.sh
