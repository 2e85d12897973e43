#!/usr/bin/env bash
# Point queries on a materialized view while it ingests, over the
# PostgreSQL port and over HTTP, on one `eddy serve --pg-addr`.
#
# The view: the orders generator paced on the wall clock at RATE events/s,
# grouped into KEYS keys (each order counts into key order_number % KEYS:
# every event changes one key's row), checkpointed every REFRESH. Once the
# view holds KEYS rows, for MEASURE s each: `eddy bench views` at QPS
# queries/s (CLIENTS clients on a schedule; latency from each query's
# scheduled start) over pg (a prepared `SELECT * FROM hot WHERE k = $1`,
# binary results) and http (`GET /api/v1/views/hot?key=`), then each as
# fast as CLIENTS clients go. The job's ingest rate is read from eddy.jobs
# before and after. Keys are drawn at random from the whole range.
#
#   PROFILE=release CARGO_TARGET_DIR=target bench/views.sh               # 1M keys, 100k events/s
#   KEYS=10000 RATE=5000 MEASURE=3 bench/views.sh                        # seconds
#   README=1 PROFILE=release ... bench/views.sh                          # and rewrite bench/README.md's table
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/serve-lib.sh

KEYS=${KEYS:-1000000}
RATE=${RATE:-100000}
QPS=${QPS:-1000}
CLIENTS=${CLIENTS:-4}
MEASURE=${MEASURE:-20}
REFRESH=${REFRESH:-1s}
. bench/lib.sh
scripts/postgres.sh client 2>/dev/null
build_eddy

server_scratch
pg_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_server "$EDDY" "$work" --pg-addr "127.0.0.1:$pg_port" --view-refresh "$REFRESH"
sql() { psql -X -A -t -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U eddy -d eddy -c "$1"; }

sql "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR)
  WITH (connector = 'generator', stream = 'orders', rate = '$RATE', count = '1000000000000', realtime = 'true')" >/dev/null
sql "CREATE MATERIALIZED VIEW hot AS
  SELECT k, count(*) AS n, sum(order_amount) AS amount
  FROM (SELECT CAST(substr(order_id, 7) AS BIGINT) % $KEYS AS k, order_amount FROM orders)
  GROUP BY k" >/dev/null
key=$(sql "SELECT key FROM eddy.views WHERE name = 'hot'")
[ "$key" = k ] || { echo "views: the view is keyed by '$key', not k" >&2; exit 1; }

# Until the view holds every key.
started=$(date +%s)
while :; do
  rows=$(sql "SELECT rows FROM eddy.views WHERE name = 'hot'")
  [ "$rows" -ge "$KEYS" ] && break
  if [ $(( $(date +%s) - started )) -gt $(( KEYS / RATE * 4 + 60 )) ]; then
    echo "views: the view holds $rows rows of $KEYS after $(( $(date +%s) - started )) s" >&2
    exit 1
  fi
  sleep 0.5
done
fill_s=$(( $(date +%s) - started ))

events() { sql "SELECT events_per_second FROM eddy.jobs WHERE name = 'view hot'"; }
load() { "$EDDY" bench views --server "$base" --pg "127.0.0.1:$pg_port" --view hot --key-column k --keys "$KEYS" --clients "$CLIENTS" --seconds "$MEASURE" "$@"; }
ingest_before=$(events)
pg_paced=$(load --protocol pg --qps "$QPS")
http_paced=$(load --protocol http --qps "$QPS")
pg_max=$(load --protocol pg --qps 0)
http_max=$(load --protocol http --qps 0)
ingest_after=$(events)
epoch=$(sql "SELECT epoch FROM eddy.views WHERE name = 'hot'")
for line in "$pg_paced" "$http_paced" "$pg_max" "$http_max"; do
  errors=$(field "$line" errors)
  [ "$errors" = 0 ] || { echo "views: $errors failed queries: $line" >&2; exit 1; }
done

table=$(mktemp)
{
  echo "$KEYS keys, $RATE events/s offered (the job read ${ingest_before} and ${ingest_after} events/s around the load), view refreshed every $REFRESH (epoch $epoch at the end; filled in ${fill_s} s); $CLIENTS clients, $MEASURE s a run; profile $PROFILE."
  echo
  echo "| protocol | load | queries/s | p50 ms | p99 ms | p99.9 ms | max ms |"
  echo "|---|---|---|---|---|---|---|"
  for pair in "pg|$QPS/s scheduled|$pg_paced" "http|$QPS/s scheduled|$http_paced" "pg|as fast as answered|$pg_max" "http|as fast as answered|$http_max"; do
    IFS='|' read -r protocol what line <<<"$pair"
    printf '| %s | %s | %.0f | %.2f | %.2f | %.2f | %.2f |\n' "$protocol" "$what" \
      "$(field "$line" qps)" "$(field "$line" p50_ms)" "$(field "$line" p99_ms)" "$(field "$line" p999_ms)" "$(field "$line" max_ms)"
  done
} > "$table"
cat "$table"
if [ -n "${README:-}" ]; then
  readme_section views "$table"
fi
rm -f "$table"
