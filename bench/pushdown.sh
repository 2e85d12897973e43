#!/usr/bin/env bash
# Filter pushdown into the `delta` and `parquet` sources: a backfill query
# reading the last tenth (by event time) of EVENTS generated payments from
# a Delta table (files of 8MB) and a Parquet directory (both in row groups of 64k
# rows), per-minute counts written as NDJSON, with event time and a
# watermark. Two forms of the same condition, run RUNS times each
# (default 5), alternating:
#
#   pushed      WHERE payment_ts >= CUT           (files/row groups skipped)
#   not pushed  WHERE payment_ts + 0 * length(payment_id) >= CUT
#                                                 (a function: every row read)
#
# Per table and form it prints the median wall time of `eddy run` with the
# min-max, the rows the source returned, and what the pushed filter
# skipped; the two forms' outputs must be identical, or the script fails.
#
#   bench/pushdown.sh                                     # 10,000,000 payments, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/pushdown.sh
#   EVENTS=100000 RUNS=1 bench/pushdown.sh                # a quick check
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-10000000}
RUNS=${RUNS:-5}
. bench/lib.sh
build_eddy

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$EDDY" generate --stream payments --rate 1000 --count "$EVENTS" > "$work/payments.ndjson"
COLUMNS_SQL="payment_id VARCHAR NOT NULL, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT NOT NULL, method VARCHAR"
cat > "$work/write.sql" <<EOF
CREATE TABLE payments ($COLUMNS_SQL) WITH (connector = 'file', path = '$work/payments.ndjson');
CREATE TABLE lake ($COLUMNS_SQL) WITH (connector = 'delta', path = '$work/lake', target_file_size = '8MB', row_group_size = '65536');
CREATE TABLE files ($COLUMNS_SQL) WITH (connector = 'parquet', path = '$work/files', row_group_size = '65536');
INSERT INTO lake SELECT * FROM payments;
INSERT INTO files SELECT * FROM payments;
EOF
"$EDDY" run "$work/write.sql" > /dev/null 2>&1
first=$(head -1 "$work/payments.ndjson" | sed -E 's/.*"payment_ts":([0-9]+).*/\1/')
last=$(tail -1 "$work/payments.ndjson" | sed -E 's/.*"payment_ts":([0-9]+).*/\1/')
CUT=$((first + (last - first) * 9 / 10))
echo "input: $EVENTS payments; reading those from the last tenth of event time (payment_ts >= $CUT); profile $PROFILE"
echo "machine: $(nproc) cores, $(uname -m); commit $(git rev-parse --short HEAD); $RUNS runs per form, alternating"

# One run over connector $1 at path $2 with condition $3: prints
# "seconds rows_returned skipped-summary" and leaves the output in $work/out.ndjson.
run_one() {
  cat > "$work/read.sql" <<EOF
CREATE TABLE hist ($COLUMNS_SQL,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND)
  WITH (connector = '$1', path = '$2');
CREATE TABLE out (window_start TIMESTAMP, payments BIGINT, revenue DOUBLE)
  WITH (connector = 'ndjson', path = '$work/out.ndjson');
INSERT INTO out SELECT w.start, n, revenue FROM (
  SELECT tumble(INTERVAL '1' MINUTE) AS w, count(*) AS n, round(sum(paid_amount), 2) AS revenue
  FROM hist WHERE $3 GROUP BY w);
EOF
  rm -f "$work/out.ndjson"
  local start end log
  start=$(date +%s.%N)
  log=$(EDDY_LOG=info "$EDDY" run "$work/read.sql" 2>&1 >/dev/null)
  end=$(date +%s.%N)
  local rows skipped
  rows=$(sed -n 's/^source hist: \([0-9]*\) rows read.*/\1/p' <<<"$log")
  skipped=$(sed -n 's/.*the pushed-down filter skipped \([0-9]*\) of \([0-9]*\) files and \([0-9]*\) of \([0-9]*\) row groups.*/\1\/\2 files, \3\/\4 row groups/p' <<<"$log")
  [ -n "$rows" ] || { echo "$log" >&2; exit 1; }
  echo "$(awk -v s="$start" -v e="$end" 'BEGIN { print e - s }') $rows ${skipped:-nothing skipped}"
}

printf '%-8s %-11s %22s %12s  %s\n' table form "wall s (min-max)" "rows read" "skipped"
for table in delta:lake parquet:files; do
  connector=${table%%:*}
  path="$work/${table#*:}"
  : > "$work/runs"
  for ((i = 0; i < RUNS; i++)); do
    # Assignments, so that a failed run fails the script.
    result=$(run_one "$connector" "$path" "payment_ts >= $CUT")
    echo "pushed $result" >> "$work/runs"
    sort "$work/out.ndjson" > "$work/pushed.out"
    result=$(run_one "$connector" "$path" "payment_ts + 0 * length(payment_id) >= $CUT")
    echo "not-pushed $result" >> "$work/runs"
    sort "$work/out.ndjson" > "$work/not-pushed.out"
    cmp -s "$work/pushed.out" "$work/not-pushed.out" || {
      echo "ERROR: $connector: the pushed and not pushed forms wrote different output" >&2
      exit 1
    }
    [ -s "$work/pushed.out" ] || { echo "ERROR: $connector: no output" >&2; exit 1; }
  done
  for form in pushed not-pushed; do
    grep "^$form " "$work/runs" | sort -k2 -g | awk -v table="$connector" '
      { wall[NR] = $2; line[NR] = $0 }
      END {
        m = int((NR + 1) / 2); n = split(line[m], f, " ")
        skipped = ""; for (i = 4; i <= n; i++) skipped = skipped " " f[i]
        printf "%-8s %-11s %8.2f (%.2f-%.2f) %12d %s\n", table, f[1], wall[m], wall[1], wall[NR], f[3], skipped
      }'
  done
done
