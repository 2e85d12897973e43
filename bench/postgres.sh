#!/usr/bin/env bash
# PostgreSQL in and out, against Debian's PostgreSQL 15 on this machine
# (scripts/postgres.sh server: default settings, wal_level = logical),
# sharing its cores with eddy:
#
# 1. snapshot: a table of ROWS rows (bigint key, text, bigint, numeric,
#    text, timestamptz) read by a `postgres-cdc` source in snapshot mode
#    (chunks of 8096 rows by key, then the job ends) into a blackhole
#    sink, against PostgreSQL's own `COPY (SELECT ...) TO STDOUT` of the
#    same rows into /dev/null (text, as eddy reads them: the ceiling of any
#    reader of the table over one connection). RUNS alternating runs,
#    median (min-max) wall time and rows/s.
# 2. changes: CHANGES changes (half inserts in transactions of 1000 rows,
#    then an update of each of those rows, 1000 a transaction) written
#    while the job is stopped, then the job resumed from its checkpoint:
#    seconds until its slot is confirmed past the last change (the job
#    reads, checkpoints every second and confirms), changes/s. RUNS runs.
# 3. lag: RATE inserts/s for LAG_SECONDS seconds (transactions of 10 rows)
#    into a table a job copies into another through a `jdbc` sink
#    (checkpoints every second, each checkpoint's rows in one transaction):
#    per row, the sink's insert time less the source row's commit time
#    (its `op_ts`), p50/p99/max.
#
#   bench/postgres.sh                                            # 1M rows, dev profile
#   ROWS=10000000 CHANGES=1000000 PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/postgres.sh
#   README=1 ...                                                 # also rewrites bench/README.md's section
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-1000000}
CHANGES=${CHANGES:-200000}
RATE=${RATE:-5000}
LAG_SECONDS=${LAG_SECONDS:-30}
RUNS=${RUNS:-3}
PORT=${PORT:-25432}
. bench/lib.sh
build_eddy

work=$(mktemp -d)
chmod 755 "$work"
password=bench-secret
bash scripts/postgres.sh server "$work/pg" "$PORT" "$password" >/dev/null
trap 'bash scripts/postgres.sh stop "$work/pg" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
export EDDY_BENCH_PG_PASSWORD=$password
sql() { PGPASSWORD=$password psql -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -qAtX -v ON_ERROR_STOP=1 "$@"; }
now() { date +%s.%N; }
elapsed() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%.3f\n", e - s }'; }
median() { # [FORMAT]: median (min-max) of the numbers on stdin
  local f=${1:-%.2f}
  sort -g | awk -v f="$f" '{ v[NR] = $1 } END { printf f " (" f "-" f ")", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[1], v[NR] }'
}
cdc() { # TABLE SLOT EXTRA: a postgres-cdc table's options
  echo "connector = 'postgres-cdc', hostname = '127.0.0.1', port = '$PORT', username = 'postgres',
    password = 'env:EDDY_BENCH_PG_PASSWORD', 'database-name' = 'postgres', 'table-name' = '$1', 'slot.name' = '$2'$3"
}
report=$work/report.md
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
{
  echo "\`ROWS=$ROWS CHANGES=$CHANGES RATE=$RATE LAG_SECONDS=$LAG_SECONDS RUNS=$RUNS PROFILE=$PROFILE bench/postgres.sh\`"
  echo "on $(nproc) cores ($cpu), PostgreSQL $(sql -c 'SHOW server_version' | cut -d' ' -f1) on the same machine, commit $(git rev-parse --short HEAD), $(date -u +%F):"
  echo
} > "$report"

# 1. The snapshot.
sql <<SQL
CREATE TABLE accounts (id bigint PRIMARY KEY, owner text NOT NULL, balance bigint NOT NULL,
  amount numeric(12, 2), note text, updated timestamptz NOT NULL);
INSERT INTO accounts SELECT g, 'owner ' || (g % 1000), g * 10, (g % 100000) / 4.0, 'note ' || g,
  timestamptz '2026-01-01 00:00:00+00' + g * interval '1 second' FROM generate_series(1, $ROWS) g;
VACUUM ANALYZE accounts;
SQL
cat > "$work/snapshot.sql" <<SQL
CREATE TABLE accounts (id BIGINT, owner STRING NOT NULL, balance BIGINT NOT NULL, amount DECIMAL(12, 2),
  note STRING, updated TIMESTAMP(6), PRIMARY KEY (id) NOT ENFORCED)
  WITH ($(cdc accounts unused ", 'scan.startup.mode' = 'snapshot'"));
CREATE TABLE sink (id BIGINT, owner STRING, balance BIGINT, amount DECIMAL(12, 2), note STRING,
  updated TIMESTAMP(6), PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'blackhole');
INSERT INTO sink SELECT * FROM accounts;
SQL
: > "$work/eddy.times"; : > "$work/copy.times"
for run in $(seq "$RUNS"); do
  start=$(now)
  sql -c "COPY (SELECT * FROM accounts) TO STDOUT" > /dev/null
  end=$(now); elapsed "$start" "$end" >> "$work/copy.times"
  start=$(now)
  "$EDDY" run --quiet "$work/snapshot.sql" > "$work/snapshot.out"
  end=$(now); elapsed "$start" "$end" >> "$work/eddy.times"
done
rate() { awk -v n="$1" '{ print n / $1 }' "$2" | median %.0f; }
{
  echo "| snapshot of $ROWS rows | wall s | rows/s |"
  echo "|---|---|---|"
  echo "| eddy, postgres-cdc snapshot mode -> blackhole | $(median < "$work/eddy.times") | $(rate "$ROWS" "$work/eddy.times") |"
  echo "| PostgreSQL COPY TO STDOUT -> /dev/null | $(median < "$work/copy.times") | $(rate "$ROWS" "$work/copy.times") |"
  echo
} >> "$report"
sql -c "DROP TABLE accounts"

# 2. Changes.
sql -c "CREATE TABLE events (id bigint PRIMARY KEY, v bigint NOT NULL, note text)"
cat > "$work/changes.sql" <<SQL
CREATE TABLE events (id BIGINT, v BIGINT NOT NULL, note STRING, PRIMARY KEY (id) NOT ENFORCED)
  WITH ($(cdc events eddy_bench_events ""));
CREATE TABLE sink (id BIGINT, v BIGINT, note STRING, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'blackhole');
INSERT INTO sink SELECT * FROM events;
SQL
confirmed_past() { # LSN: whether the slot is confirmed to LSN
  [ "$(sql -c "SELECT coalesce(confirmed_flush_lsn >= '$1', false) FROM pg_replication_slots WHERE slot_name = 'eddy_bench_events'")" = t ]
}
wait_confirmed() { # LSN PID
  while ! confirmed_past "$1"; do
    kill -0 "$2" 2>/dev/null || { echo "the job ended early" >&2; cat "$work/changes.log" >&2; exit 1; }
    sleep 0.05
  done
}
# The slot made and the (empty) snapshot read, then the job stopped.
"$EDDY" run --quiet "$work/changes.sql" --state-dir "$work/changes-state" --checkpoint-interval 1s \
  > /dev/null 2> "$work/changes.log" &
pid=$!
wait_confirmed "$(sql -c 'SELECT pg_current_wal_lsn()')" "$pid"
sleep 1.5
kill -TERM "$pid"; wait "$pid" || true
half=$((CHANGES / 2))
: > "$work/changes.times"
for run in $(seq "$RUNS"); do
  base=$(( (run - 1) * half ))
  sql <<SQL
DO \$\$
BEGIN
  FOR t IN 0..($half / 1000 - 1) LOOP
    INSERT INTO events SELECT g, g, 'note ' || g FROM generate_series($base + t * 1000 + 1, $base + t * 1000 + 1000) g;
    COMMIT;
  END LOOP;
  FOR t IN 0..($half / 1000 - 1) LOOP
    UPDATE events SET v = v + 1 WHERE id BETWEEN $base + t * 1000 + 1 AND $base + t * 1000 + 1000;
    COMMIT;
  END LOOP;
END
\$\$;
SQL
  target=$(sql -c 'SELECT pg_current_wal_lsn()')
  start=$(now)
  "$EDDY" run --quiet "$work/changes.sql" --state-dir "$work/changes-state" --checkpoint-interval 1s \
    > /dev/null 2> "$work/changes.log" &
  pid=$!
  wait_confirmed "$target" "$pid"
  end=$(now); elapsed "$start" "$end" >> "$work/changes.times"
  kill -TERM "$pid"; wait "$pid" || true
done
{
  echo "| $CHANGES changes read from the slot (resumed job, checkpoints every 1 s) | s until confirmed | changes/s |"
  echo "|---|---|---|"
  echo "| eddy, postgres-cdc -> blackhole | $(median < "$work/changes.times") | $(rate "$CHANGES" "$work/changes.times") |"
  echo
} >> "$report"
sql -c "SELECT pg_drop_replication_slot('eddy_bench_events')" >/dev/null

# 3. Lag from commit to the jdbc sink's write.
sql <<SQL
CREATE TABLE ticks (id bigint PRIMARY KEY, payload text);
CREATE TABLE seen (id bigint PRIMARY KEY, committed timestamptz, written timestamptz DEFAULT clock_timestamp());
SQL
cat > "$work/lag.sql" <<SQL
CREATE TABLE ticks (id BIGINT, payload STRING, op_ts TIMESTAMP_LTZ(3) METADATA FROM 'op_ts' VIRTUAL,
  PRIMARY KEY (id) NOT ENFORCED) WITH ($(cdc ticks eddy_bench_ticks ""));
CREATE TABLE seen (id BIGINT, committed TIMESTAMP(3), PRIMARY KEY (id) NOT ENFORCED) WITH (
  connector = 'jdbc', url = 'jdbc:postgresql://127.0.0.1:$PORT/postgres', 'table-name' = 'seen',
  username = 'postgres', password = 'env:EDDY_BENCH_PG_PASSWORD');
INSERT INTO seen SELECT id, op_ts FROM ticks;
SQL
"$EDDY" run --quiet "$work/lag.sql" --state-dir "$work/lag-state" --checkpoint-interval 1s \
  > /dev/null 2> "$work/lag.log" &
pid=$!
until [ "$(sql -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'eddy_bench_ticks' AND confirmed_flush_lsn IS NOT NULL")" = 1 ]; do sleep 0.1; done
sleep 2
per=$((RATE / 100))
sql <<SQL
DO \$\$
DECLARE started timestamptz := clock_timestamp(); n bigint := 0;
BEGIN
  WHILE clock_timestamp() < started + interval '$LAG_SECONDS seconds' LOOP
    INSERT INTO ticks SELECT n + g, 'tick' FROM generate_series(1, $per) g;
    COMMIT;
    n := n + $per;
    -- Paced: the rows so far are due at n / RATE seconds.
    PERFORM pg_sleep(greatest(0, extract(epoch FROM started + (n::float8 / $RATE) * interval '1 second' - clock_timestamp())));
  END LOOP;
END
\$\$;
SQL
total=$(sql -c "SELECT count(*) FROM ticks")
until [ "$(sql -c "SELECT count(*) FROM seen")" = "$total" ]; do
  kill -0 "$pid" 2>/dev/null || { cat "$work/lag.log" >&2; exit 1; }
  sleep 0.2
done
kill -TERM "$pid"; wait "$pid" || true
lags=$(sql -F ' ' -c "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY l)::numeric, 0),
  round(percentile_cont(0.99) WITHIN GROUP (ORDER BY l)::numeric, 0), round(max(l)::numeric, 0)
  FROM (SELECT extract(epoch FROM written - committed) * 1000 AS l FROM seen) x")
read -r p50 p99 worst <<<"$lags"
achieved=$(awk -v n="$total" -v s="$LAG_SECONDS" 'BEGIN { printf "%.0f", n / s }')
{
  echo "| lag, commit -> jdbc sink write ($total rows, $achieved inserts/s, checkpoints every 1 s) | p50 ms | p99 ms | max ms |"
  echo "|---|---|---|---|"
  echo "| eddy, postgres-cdc -> jdbc | $p50 | $p99 | $worst |"
} >> "$report"

cat "$report"
if [ "${README:-0}" = 1 ]; then
  readme_section postgres "$report"
fi
