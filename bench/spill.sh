#!/usr/bin/env bash
# State past the memory limit. QUERY=group (the default): `SELECT k,
# count(*), sum(v), avg(v) FROM events GROUP BY k` over EVENTS events on
# KEYS keys drawn uniformly (so a spilled group is read back as often as
# any other). QUERY=join: `orders LEFT JOIN payments ON id`, EVENTS/2
# orders and EVENTS/2 payments on orders drawn uniformly (every row is
# kept: EVENTS rows of join state). QUERY=window: per-key tumbling windows
# of 10 s (count, sum, min, max) over EVENTS events on KEYS keys, events up
# to 5 s out of order over 100 s of event time, the watermark 20 s behind
# (three windows open at a time). QUERY=interval: `orders LEFT JOIN
# payments ON id AND p.ts BETWEEN o.ts - 30 s AND o.ts + 90 s`, EVENTS/2
# orders 1 ms apart and about as many payments, each 40 s before to 120 s
# after its order (some outside the interval: orders padded as the
# watermark passes them). QUERY=session: per-key session windows (gap
# 10 s; count, sum, min, max) over the window query's events, the
# watermark 6 s behind. QUERY=over: a running count, sum and mean per key
# (OVER over an append-only input, a row out per event) over the same
# events, the watermark 6 s behind. From NDJSON files, into a blackhole
# sink, at one instance. Runs it without a limit, then at
# a tenth of that run's state (LIMIT to choose), RUNS times each in turn;
# prints per form the median (min-max) seconds and events/s, the peak
# resident memory (the process's, /usr/bin/time), the bytes spilled and
# read back, the spilled/unlimited speed ratio and the peak RSS above the
# limit. Fails when the two forms' per-key results differ (the final
# tables their Debezium changelogs describe).
#
#   EDDY_BIN=~/.cache/eddy-release/release/eddy bench/spill.sh    # 10M events, 2M keys
#   EVENTS=200000 KEYS=50000 RUNS=1 bench/spill.sh                # a check
#   QUERY=join EVENTS=4000000 LIMIT=256MiB bench/spill.sh          # the 4M-row join
#   QUERY=window EVENTS=4000000 KEYS=1000000 bench/spill.sh        # windows
#   QUERY=interval EVENTS=2000000 bench/spill.sh                   # an interval join
#   QUERY=session EVENTS=2000000 KEYS=500000 bench/spill.sh        # session windows
#   QUERY=over EVENTS=2000000 KEYS=500000 bench/spill.sh           # running aggregates
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-10000000}
KEYS=${KEYS:-2000000}
RUNS=${RUNS:-3}
QUERY=${QUERY:-group}
case "$QUERY" in
  group) kind=updating_aggregate table=totals ;;
  join) kind=updating_join table=paid ;;
  window) kind=window_aggregate table=windows ;;
  interval) kind=interval_join table=paid ;;
  session) kind=session_aggregate table=sessions ;;
  over) kind=over table=running ;;
  *) echo "QUERY is group, join, window, interval, session or over, not $QUERY" >&2; exit 2 ;;
esac
. bench/lib.sh
build_eddy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 bench/spill_input.py "$work" "$QUERY" "$KEYS" "$EVENTS"

# timed_events DELAY: the table of the window, session and over queries'
# events, the watermark DELAY seconds behind.
timed_events() {
  cat <<SQL
CREATE TABLE events (
  k VARCHAR, v BIGINT, at_ms BIGINT,
  ts TIMESTAMP(3) GENERATED ALWAYS AS (to_timestamp_millis(at_ms)) STORED,
  WATERMARK FOR ts AS ts - INTERVAL '$1' SECOND
) WITH (connector = 'file', path = '$work/events.ndjson');
SQL
}

query() {
  if [ "$QUERY" = group ]; then
    cat <<SQL
CREATE TABLE events (k VARCHAR, v BIGINT) WITH (connector = 'file', path = '$work/events.ndjson');
CREATE TABLE totals (k VARCHAR, n BIGINT, total BIGINT, mean DOUBLE) WITH ($1);
INSERT INTO totals SELECT k, count(*), sum(v), avg(v) FROM events GROUP BY k;
SQL
  elif [ "$QUERY" = window ]; then
    timed_events 20
    cat <<SQL
CREATE TABLE windows (window_start TIMESTAMP(3), k VARCHAR, n BIGINT, total BIGINT, low BIGINT, high BIGINT) WITH ($1);
INSERT INTO windows SELECT w.start, k, n, total, low, high FROM (
  SELECT tumble(INTERVAL '10' SECOND) AS w, k, count(*) AS n, sum(v) AS total, min(v) AS low, max(v) AS high
  FROM events GROUP BY w, k);
SQL
  elif [ "$QUERY" = session ]; then
    timed_events 6
    cat <<SQL
CREATE TABLE sessions (session_start TIMESTAMP(3), session_end TIMESTAMP(3), k VARCHAR, n BIGINT, total BIGINT, low BIGINT, high BIGINT) WITH ($1);
INSERT INTO sessions SELECT s.start, s.end, k, n, total, low, high FROM (
  SELECT session(INTERVAL '10' SECOND) AS s, k, count(*) AS n, sum(v) AS total, min(v) AS low, max(v) AS high
  FROM events GROUP BY s, k);
SQL
  elif [ "$QUERY" = over ]; then
    timed_events 6
    cat <<SQL
CREATE TABLE running (k VARCHAR, v BIGINT, at_ms BIGINT, n BIGINT, total BIGINT, mean DOUBLE) WITH ($1);
INSERT INTO running SELECT k, v, at_ms,
  count(*) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
  sum(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
  avg(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
FROM events;
SQL
  elif [ "$QUERY" = interval ]; then
    cat <<SQL
CREATE TABLE orders (
  id VARCHAR, amount BIGINT, at_ms BIGINT,
  ts TIMESTAMP(3) GENERATED ALWAYS AS (to_timestamp_millis(at_ms)) STORED,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = '$work/orders.ndjson');
CREATE TABLE payments (
  id VARCHAR, paid BIGINT, at_ms BIGINT,
  ts TIMESTAMP(3) GENERATED ALWAYS AS (to_timestamp_millis(at_ms)) STORED,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = '$work/payments.ndjson');
CREATE TABLE paid (id VARCHAR, amount BIGINT, paid BIGINT) WITH ($1);
INSERT INTO paid SELECT o.id, o.amount, p.paid FROM orders o LEFT JOIN payments p
  ON o.id = p.id AND p.ts BETWEEN o.ts - INTERVAL '30' SECOND AND o.ts + INTERVAL '90' SECOND;
SQL
  else
    cat <<SQL
CREATE TABLE orders (id VARCHAR, amount BIGINT) WITH (connector = 'file', path = '$work/orders.ndjson');
CREATE TABLE payments (id VARCHAR, paid BIGINT) WITH (connector = 'file', path = '$work/payments.ndjson');
CREATE TABLE paid (id VARCHAR, amount BIGINT, paid BIGINT) WITH ($1);
INSERT INTO paid SELECT o.id, o.amount, p.paid FROM orders o LEFT JOIN payments p ON o.id = p.id;
SQL
  fi
}
query "connector = 'blackhole'" > "$work/bench.sql"
query "connector = 'ndjson', path = '$table.ndjson', format = 'debezium-json'" > "$work/check.sql"
echo "$QUERY: $EVENTS events$( case $QUERY in group | window | session | over) echo " on $KEYS keys" ;; esac) ($(du -ch "$work"/*.ndjson | tail -1 | cut -f1) of NDJSON); $RUNS alternating runs; $(nproc) cores; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

# run FORM ARGS...: one run; appends "seconds peak_kib written_mib read_mib state_mib" to $work/FORM
run() {
  local form=$1
  shift
  /usr/bin/time -f "%M" -o "$work/rss" "$EDDY" run "$work/bench.sql" --parallelism 1 "$@" 2> "$work/summary"
  local line ms state written read
  line=$(grep "^$kind#" "$work/summary")
  ms=$(sed -nE 's/^finished in ([0-9]+) ms$/\1/p' "$work/summary")
  state=$(sed -nE 's/.*in state \(at most [0-9]+; ([0-9.]+) MiB, at most ([0-9.]+) MiB\).*/\1/p' <<<"$line")
  written=$(sed -nE 's/.*spilled ([0-9.]+) MiB to disk.*/\1/p' <<<"$line")
  read=$(sed -nE 's/.*and read ([0-9.]+) MiB back.*/\1/p' <<<"$line")
  echo "$(awk -v ms="$ms" 'BEGIN { printf "%.3f", ms / 1000 }') $(cat "$work/rss") ${written:-0} ${read:-0} $state" >> "$work/$form"
}

# The limit: a tenth of the unlimited run's state, unless given.
"$EDDY" run "$work/bench.sql" --parallelism 1 2> "$work/summary"
state=$(grep "^$kind#" "$work/summary" | sed -nE 's/.*in state \(at most [0-9]+; ([0-9.]+) MiB, at most ([0-9.]+) MiB\).*/\2/p')
LIMIT=${LIMIT:-$(awk -v s="$state" 'BEGIN { printf "%dKiB", s * 1024 / 10 }')}
echo "unlimited state: $state MiB; limit: $LIMIT"

for ((r = 1; r <= RUNS; r++)); do
  run unlimited
  run limited --memory-limit "$LIMIT" --spill-dir "$work/spill"
done

# The same results either way.
for form in unlimited limited; do
  args=()
  [ "$form" = limited ] && args=(--memory-limit "$LIMIT" --spill-dir "$work/spill")
  (cd "$work" && "$EDDY" run check.sql --quiet --parallelism 1 --output "$work/out-$form" "${args[@]}")
done
python3 - "$work" "$table" <<'PY'
import collections, json, sys
def table(path):
    rows = collections.Counter()
    for line in open(path):
        event = json.loads(line)
        if event["before"] is not None:
            rows[json.dumps(event["before"], sort_keys=True)] -= 1
        if event["after"] is not None:
            rows[json.dumps(event["after"], sort_keys=True)] += 1
    return {row: n for row, n in rows.items() if n}
a, b = (table(f"{sys.argv[1]}/out-{form}/{sys.argv[2]}.ndjson") for form in ("unlimited", "limited"))
if a != b:
    sys.exit(f"the spilled run's {sys.argv[2]} differ from the unlimited run's ({len(a)} against {len(b)} rows)")
PY

python3 - "$work" "$EVENTS" "$LIMIT" <<'PY'
import statistics, sys
work, events, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
forms = {}
for form in ("unlimited", "limited"):
    rows = [list(map(float, l.split())) for l in open(f"{work}/{form}")]
    forms[form] = rows
    seconds = [r[0] for r in rows]
    rss = [r[1] / 1024 for r in rows]
    print(f"{form:9}: {statistics.median(seconds):.2f} s ({min(seconds):.2f}-{max(seconds):.2f}), "
          f"{events / statistics.median(seconds) / 1e6:.2f}M events/s, peak RSS {statistics.median(rss):.0f} MiB "
          f"({min(rss):.0f}-{max(rss):.0f}), state at the end {rows[0][4]:.1f} MiB in memory, "
          f"spilled {statistics.median(r[2] for r in rows):.0f} MiB, read back {statistics.median(r[3] for r in rows):.0f} MiB")
u = statistics.median(r[0] for r in forms["unlimited"])
l = statistics.median(r[0] for r in forms["limited"])
print(f"spilled speed / unlimited speed: {u / l:.2f} (median/median; worst pair "
      f"{min(r[0] for r in forms['unlimited']) / max(r[0] for r in forms['limited']):.2f})")
number = float(''.join(c for c in limit if c.isdigit() or c == '.'))
size = number * {"K": 1 / 1024, "M": 1, "G": 1024}[limit.lstrip("0123456789.")[0].upper()]
print(f"limited peak RSS - limit: {statistics.median(r[1] / 1024 for r in forms['limited']) - size:.0f} MiB "
      f"(limit {size:.1f} MiB); final tables equal")
PY
