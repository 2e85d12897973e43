#!/usr/bin/env bash
# eddy and Apache Flink 1.20 side by side on this machine: the same SQL
# text over the same events. The queries (bench/flink/QUERY.sql, Flink SQL
# that eddy runs as it is, over orders.sql and payments.sql):
#   window     tumbling 10 s windows, count and sum per customer
#   hop        5 s windows every second
#   join       payments LEFT JOIN orders within 10 s either way (interval join)
#   group      count and sum per customer, no window (an updating aggregate)
#   left_join  payments LEFT JOIN orders, no time bound (an updating join)
#
# Each query runs over two sources (SOURCES, default both):
# - ndjson: ROWS orders and ROWS payments from `eddy generate`, end to end
#   with decoding. eddy reads each as one NDJSON file; Flink reads the
#   same rows as a directory of FLINK_FILES files (default: one per
#   parallel reader), dealt round-robin line by line, so each file spans
#   the whole stream in time order and the readers advance through event
#   time together. Consecutive stretches instead hold Flink's watermark
#   back to the slowest reader's stretch (its interval join then buffered
#   half the stream and ran 4x slower), and more files than readers make
#   it drop rows as late: a reader that takes a second file reads it
#   behind its own watermark (the check below fails then).
# - datagen ("QUERY, generated" in the table): the operators alone, no
#   decoding on either side: both engines make ROWS orders and payments in
#   process from the same SQL (orders_datagen.sql, payments_datagen.sql:
#   Flink's datagen sequence, every other column computed from it, so the
#   rows are the same on both; the check below proves it by value).
# For each query:
# - check: each engine runs it once, its blackhole sink made a file sink of
#   Debezium change events; what each wrote is replayed to its final rows
#   and compared by value (bench/compare_outputs.py: sorted, floats within
#   1e-9), and the script fails on any difference.
# - RUNS timed runs (default 5), alternating: eddy a process per run at its
#   default flags (the whole process timed), Flink one JVM for the query
#   that runs it once before the timed runs (its cold run, shown apart), so
#   the timed ones are warm; Flink's time is the job's net runtime as Flink
#   reports it (JVM start and planning left out); the waiting JVM is
#   stopped (SIGSTOP) while eddy's run goes. Flink runs at parallelism
#   FLINK_PARALLELISM (default: the number of cores, as eddy runs one
#   instance per core) in its best form for updating queries: mini-batches
#   (1 s or 5000 rows) with two-phase aggregation. No checkpoints on
#   either side.
# Prints a markdown table: events/s for each, median (min-max), and the
# ratio; events per CPU-second (the JVM's CPU over the job, every thread)
# and its ratio; peak resident memory (eddy's process; Flink's whole JVM).
#
#   bench/flink.sh                                      # 2,000,000 rows, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/flink.sh
#   QUERIES="group left_join" ROWS=20000 RUNS=1 bench/flink.sh
#   SOURCES=datagen QUERIES=window bench/flink.sh       # the window operator alone
#   README=1 ...                                        # also write the table into bench/README.md
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-2000000}
RUNS=${RUNS:-5}
QUERIES=${QUERIES:-window hop join group left_join}
SOURCES=${SOURCES:-ndjson datagen}
FLINK_PARALLELISM=${FLINK_PARALLELISM:-$(nproc)}
FLINK_FILES=${FLINK_FILES:-$FLINK_PARALLELISM}
. bench/lib.sh
# lib.sh pins one instance per keyed operator; here eddy runs as users run it.
[ -n "${PARALLELISM:-}" ] || unset EDDY_PARALLELISM
build_eddy
flink_env

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/orders" "$work/payments"
"$EDDY" generate --stream orders --rate 1000 --count "$ROWS" > "$work/orders.ndjson"
"$EDDY" generate --stream payments --rate 1000 --count "$ROWS" > "$work/payments.ndjson"
split -n "r/$FLINK_FILES" -d "$work/orders.ndjson" "$work/orders/part-"
split -n "r/$FLINK_FILES" -d "$work/payments.ndjson" "$work/payments/part-"

command_line="$(for v in PROFILE ROWS RUNS QUERIES SOURCES PARALLELISM FLINK_PARALLELISM FLINK_HEAP FIND_HEAP FLINK_FILES; do [ -z "${!v:-}" ] || printf '%s="%s" ' "$v" "${!v}"; done)bench/flink.sh"
{
  echo "\`$command_line\` on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), $(free -g | awk '/^Mem:/ { print $2 }') GiB, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%d):"
  echo "$ROWS orders (and $ROWS payments for the joins, whose events are both) as NDJSON, and (the rows marked generated) made in process by both from datagen sequences; eddy profile $PROFILE at ${PARALLELISM:-one instance per core (its default)}${PARALLELISM:+ instance(s) per keyed operator}, one file per stream; Flink 1.20.0 (PyFlink, Java 17, local MiniCluster, JVM heap ${FLINK_HEAP:-the JVM default}) at parallelism $FLINK_PARALLELISM, $FLINK_FILES files per stream, mini-batch on; no checkpoints; median (min-max) of $RUNS alternating runs, Flink's warm:"
} > "$work/heading"

for source in $SOURCES; do
  for q in $QUERIES; do
    case $source in
      ndjson)
        name=$q
        sql_files=(bench/flink/orders.sql)
        eddy_flags=(--set "ORDERS=$work/orders.ndjson")
        flink_vars=("ORDERS=$work/orders")
        ;;
      datagen)
        name="$q, generated"
        sql_files=(bench/flink/orders_datagen.sql)
        eddy_flags=(--set "ROWS=$ROWS")
        flink_vars=("ROWS=$ROWS")
        ;;
      *) echo "SOURCES: '$source' is neither ndjson nor datagen" >&2; exit 2 ;;
    esac
    flink_vars+=("flink:parallelism.default=$FLINK_PARALLELISM"
      flink:table.exec.mini-batch.enabled=true flink:table.exec.mini-batch.allow-latency=1s
      flink:table.exec.mini-batch.size=5000 flink:table.optimizer.agg-phase-strategy=TWO_PHASE)
    events=$ROWS
    case $q in
      join | left_join)
        if [ "$source" = ndjson ]; then
          sql_files+=(bench/flink/payments.sql)
          eddy_flags+=(--set "PAYMENTS=$work/payments.ndjson")
          flink_vars+=("PAYMENTS=$work/payments")
        else
          sql_files+=(bench/flink/payments_datagen.sql)
        fi
        events=$((2 * ROWS))
        ;;
    esac
    sql_files+=("bench/flink/$q.sql")
    printf '%s\tevents\t{"events":%s}\n' "$name" "$events" >> "$work/runs.tsv"
    check_values "$name" || continue
    smallest_heap "$name"
    alternate_runs "$name"
  done
done

python3 bench/side_by_side_table.py "$work/heading" "$work/runs.tsv" > "$work/table.md"
cat "$work/table.md"
if [ -n "${README:-}" ]; then
  readme_section flink.sh "$work/table.md"
fi
