#!/usr/bin/env bash
# eddy's Parquet read by independent readers: runs the reference pipeline
# once to Parquet and once to NDJSON, and a device-metrics job partitioned by
# site and rolled (several files per site), then reads them with DuckDB and pyarrow (installed from
# PyPI into the project's virtual environment) via tests/parquet/check.py:
# UTC-adjusted timestamps, row counts and sums equal the NDJSON output's,
# Hive partitions visible.
#
#   scripts/parquet-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/python-env.sh
python_env duckdb==2.0.0 pyarrow==26.0.1

EDDY=${EDDY:-${CARGO_TARGET_DIR:-target}/debug/eddy}
[ -x "$EDDY" ] || cargo build -q --workspace --bin eddy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$EDDY" run --quiet queries/ --output "$work/parquet" --format parquet >/dev/null
"$EDDY" run --quiet queries/ --output "$work/ndjson" >/dev/null
cat > "$work/partitioned.sql" <<SQL
CREATE TABLE devices (
  device_id VARCHAR, site_id VARCHAR, event_type VARCHAR, status VARCHAR, event_ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(event_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '3' SECOND
) WITH (connector = 'generator', stream = 'devices', rate = '200', count = '20000');
CREATE TABLE by_site (site_id VARCHAR, window_start TIMESTAMP(3), events BIGINT, faults BIGINT)
  WITH (connector = 'parquet', path = '$work/by_site', partition_by = 'site_id', rolling_rows = '8');
INSERT INTO by_site
SELECT site_id, w.start, events, faults FROM (
  SELECT tumble(INTERVAL '5' SECOND) AS w, site_id, count(*) AS events,
         count(*) FILTER (WHERE event_type = 'fault') AS faults
  FROM devices GROUP BY w, site_id);
SQL
"$EDDY" run --quiet "$work/partitioned.sql" >/dev/null
"$VENV/bin/python" tests/parquet/check.py "$work/parquet" "$work/ndjson" "$work/by_site"
