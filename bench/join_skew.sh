#!/usr/bin/env bash
# Benchmark: the interval join under skew, against itself on the same
# volume. Four LEFT joins of ROWS rows per side (one row per ms, bound
# +-10 ms, watermark 2 s):
#   spread    keys over 100,000 values, every row matches
#   hot       one key for every row (all rows in one index bucket)
#   unmatched spread keys, no right row matches (every left row is padded)
#   both      one key and no match
# A join whose eviction or padding cost grows with the bucket or with the
# unmatched rows shows here as hot/spread or unmatched/spread far below 1.
#
#   bench/join_skew.sh                       # 500,000 rows per side, dev profile
#   ROWS=2000000 PROFILE=release CARGO_TARGET_DIR=$HOME/.cache/eddy-release bench/join_skew.sh
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-500000}
. bench/lib.sh
build_eddy

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work" "$ROWS" <<'PY'
import sys
work, rows = sys.argv[1], int(sys.argv[2])
t0 = 1_700_000_000_000
def side(name, key, offset):
    with open(f"{work}/{name}.ndjson", "w") as f:
        for i in range(rows):
            f.write('{"k":"%s","v":%d,"ts":%d}\n' % (key(i), i, t0 + i + offset))
side("l_spread", lambda i: "k%d" % (i % 100_000), 0)
side("r_spread", lambda i: "k%d" % (i % 100_000), 3)
side("r_miss", lambda i: "m%d" % (i % 100_000), 3)
side("l_hot", lambda i: "k", 0)
side("r_hot", lambda i: "k", 3)
side("r_hot_miss", lambda i: "m", 3)
PY
cat > "$work/join.sql" <<'SQL'
CREATE TABLE l (k VARCHAR, v BIGINT, ts BIGINT,
  et TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR et AS et - INTERVAL '2' SECOND) WITH (connector = 'file', path = '${LEFT}');
CREATE TABLE r (k VARCHAR, v BIGINT, ts BIGINT,
  et TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR et AS et - INTERVAL '2' SECOND) WITH (connector = 'file', path = '${RIGHT}');
CREATE TABLE out (lv BIGINT, rv BIGINT) WITH (connector = 'blackhole');
INSERT INTO out SELECT l.v, r.v FROM l LEFT JOIN r
  ON l.k = r.k AND r.et BETWEEN l.et - INTERVAL '10' MILLISECOND AND l.et + INTERVAL '10' MILLISECOND;
SQL

run() { # name left right -> events/s (both sides' rows)
  local start end
  start=$(date +%s%N)
  "$EDDY" run "$work/join.sql" --set LEFT="$work/$2.ndjson" --set RIGHT="$work/$3.ndjson" >/dev/null 2>"$work/$1.log"
  end=$(date +%s%N)
  awk -v n=$((2 * ROWS)) -v ns=$((end - start)) -v name="$1" 'BEGIN { printf "%-10s %12.0f events/s  %6.2f s\n", name, n / (ns / 1e9), ns / 1e9 }'
}
echo "input: $ROWS rows per side; profile $PROFILE"
spread=$(run spread l_spread r_spread); echo "$spread"
hot=$(run hot l_hot r_hot); echo "$hot"
miss=$(run unmatched l_spread r_miss); echo "$miss"
both=$(run both l_hot r_hot_miss); echo "$both"
rate() { awk '{print $2}' <<<"$1"; }
awk -v s="$(rate "$spread")" -v h="$(rate "$hot")" -v m="$(rate "$miss")" -v b="$(rate "$both")" 'BEGIN {
  printf "hot/spread %.2fx, unmatched/spread %.2fx, hot unmatched/spread %.2fx\n", h / s, m / s, b / s }'
