#!/usr/bin/env bash
# Sinks and checkpoints on an S3-compatible store against the local disk.
# The store is s3s-fs (scripts/s3-server.sh) on this machine over a
# directory of the same disk, so the figures are the price of eddy's object
# store path (HTTP requests, spool files, uploads, publishing by copy), not
# of a network.
#
# Sinks: the reference pipeline's enrichment (the payments/orders interval
# join) over EVENTS generated events (half orders, half payments, NDJSON on
# the local disk), its enriched stream written with checkpoints every
# CHECKPOINT (default 1s, state on the local disk), exactly once:
#
#   parquet-local / parquet-s3   connector = 'parquet' (files published per checkpoint)
#   delta-local   / delta-s3     connector = 'delta'   (one commit per checkpoint)
#
# Checkpoints: a keyed updating query (the EVENTS/2 orders counted and
# summed per order id: one key each, a table that grows to every order,
# into a blackhole) with its state directory on the local disk and in the
# bucket (--state-dir s3://...): every checkpoint's new files (the keys
# that changed since the last) uploaded before it completes.
#
# Each configuration runs RUNS times (default 5), alternating; per
# configuration the median run's wall time (the whole `eddy run`) with the
# min-max, rows/s, the median of every run's longest checkpoint (from the
# start of its barriers to its sinks committed) and the MiB checkpointed. Row counts must agree, or the script
# fails.
#
#   bench/object_storage.sh                                   # 10,000,000 events, dev profile
#   PROFILE=release bench/object_storage.sh
#   EVENTS=200000 RUNS=1 bench/object_storage.sh              # a quick check
#   README=1 ...                                              # also write the table into bench/README.md
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-10000000}
RUNS=${RUNS:-5}
CHECKPOINT=${CHECKPOINT:-1s}
. bench/lib.sh
build_eddy

work=$(mktemp -d)
server_pid=
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT
enrichment_input "$work"
echo "checkpoints every $CHECKPOINT; $RUNS runs per configuration, alternating"
echo "machine: $(nproc) cores, $(uname -m); commit $(git rev-parse --short HEAD)"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$work/store/lake"
scripts/s3-server.sh start "$port" "$work/store" > "$work/store.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
  (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
export AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_ALLOW_HTTP=true AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=eddy AWS_SECRET_ACCESS_KEY=eddy-secret

job() {
  sed "s|WITH (connector = 'stdout', tag = 'ENRICHED')|WITH ($1)|" queries/10_enrichment.sql
}
job "connector = 'parquet', path = '\${OUT}', rolling_bytes = '128MB'" > "$work/parquet.sql"
job "connector = 'delta', path = '\${OUT}'" > "$work/delta.sql"
grep -q "connector = 'delta'" "$work/delta.sql" || { echo "the sink was not replaced" >&2; exit 1; }
cat > "$work/keyed.sql" <<SQL
CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR)
  WITH (connector = 'file', path = '$work/orders.ndjson');
CREATE TABLE totals (order_id VARCHAR, n BIGINT, total DOUBLE) WITH (connector = 'blackhole');
INSERT INTO totals SELECT order_id, count(*), sum(order_amount) FROM orders GROUP BY order_id;
SQL

# One run: prints "seconds rows longest_checkpoint_ms bytes_checkpointed".
run_one() {
  local config=$1 dir="$work/run" summary start end
  rm -rf "$dir" && mkdir -p "$dir"
  local kind=${config%-*} where=${config##*-}
  local out="$dir/out" state="$dir/state"
  if [ "$where" = s3 ]; then
    out="s3://lake/$config-$RANDOM$RANDOM"
  fi
  start=$(date +%s.%N)
  case $kind in
    keyed)
      [ "$where" = s3 ] && state="s3://lake/state-$RANDOM$RANDOM"
      summary=$("$EDDY" run "$work/keyed.sql" --state-dir "$state" \
        --checkpoint-interval "$CHECKPOINT" 2>&1 >/dev/null) ;;
    *)
      summary=$("$EDDY" run queries/00_sources.sql "$work/$kind.sql" --set "OUT=$out" \
        --input "orders=$work/orders.ndjson" --input "payments=$work/payments.ndjson" \
        --state-dir "$state" --checkpoint-interval "$CHECKPOINT" 2>&1 >/dev/null) ;;
  esac
  end=$(date +%s.%N)
  local rows longest bytes
  rows=$(sed -n 's/^sink [a-z_]*: \([0-9]*\) rows written.*/\1/p' <<<"$summary" | head -1)
  longest=$(sed -n 's/.*longest \([0-9]*\) ms.*/\1/p' <<<"$summary" | head -1)
  bytes=$(sed -n 's/^checkpoints: [0-9]* taken, \([0-9.]*\) MiB written.*/\1/p' <<<"$summary" | head -1)
  [ -n "$rows" ] || { echo "$summary" >&2; exit 1; }
  echo "$(awk -v s="$start" -v e="$end" 'BEGIN { print e - s }') $rows ${longest:-0} ${bytes:-0}"
}

configs=(parquet-local parquet-s3 delta-local delta-s3 keyed-local keyed-s3)
for ((i = 0; i < RUNS; i++)); do
  for config in "${configs[@]}"; do
    # An assignment, so that a failed run fails the script.
    result=$(run_one "$config")
    echo "$config $result" >> "$work/runs"
    tail -1 "$work/runs" >&2
  done
done

for kind in parquet delta keyed; do
  counts=$(grep "^$kind-" "$work/runs" | awk '{ print $3 }' | sort -u)
  if [ "$(wc -l <<<"$counts")" != 1 ]; then
    echo "ERROR: $kind wrote different row counts: $(tr '\n' ' ' <<<"$counts")" >&2
    exit 1
  fi
done
printf '%-14s %9s %15s %11s %12s %16s %14s\n' config "wall s" "(min-max)" rows "rows/s" "longest chk ms" "chk MiB" | tee "$work/table"
for config in "${configs[@]}"; do
  longest=$(grep "^$config " "$work/runs" | awk '{ print $4 }' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  grep "^$config " "$work/runs" | sort -k2 -g | awk -v longest="$longest" '
    { wall[NR] = $2; line[NR] = $0 }
    END {
      m = int((NR + 1) / 2); split(line[m], f, " ")
      printf "%-14s %9.2f %15s %11d %12.0f %16d %14.1f\n", f[1], f[2], sprintf("(%.2f-%.2f)", wall[1], wall[NR]), f[3], f[3] / f[2], longest, f[5]
    }'
done | tee -a "$work/table"
awk '
  NR > 1 { wall[$1] = $2 }
  END {
    printf "\nratios (bucket / local disk, median wall): parquet %.2f, delta %.2f, keyed checkpoints %.2f\n",
      wall["parquet-s3"] / wall["parquet-local"], wall["delta-s3"] / wall["delta-local"], wall["keyed-s3"] / wall["keyed-local"]
  }' "$work/table"
if [ "${README:-}" = 1 ]; then
  {
    echo '```'
    echo "EVENTS=$EVENTS RUNS=$RUNS CHECKPOINT=$CHECKPOINT PROFILE=$PROFILE, commit $(git rev-parse --short HEAD), $(nproc) cores"
    cat "$work/table"
    awk 'NR > 1 { wall[$1] = $2 } END { printf "ratios (bucket / local disk, median wall): parquet %.2f, delta %.2f, keyed checkpoints %.2f\n", wall["parquet-s3"] / wall["parquet-local"], wall["delta-s3"] / wall["delta-local"], wall["keyed-s3"] / wall["keyed-local"] }' "$work/table"
    echo '```'
  } > "$work/table.md"
  readme_section object_storage.sh "$work/table.md"
fi
