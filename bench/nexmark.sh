#!/usr/bin/env bash
# Nexmark as the suite defines it: the suite's DDL and query texts
# (bench/nexmark/flink/: one `datagen` table of every event, 1 person : 3
# auctions : 46 bids, and a view per kind), so every one of EVENTS events is
# generated and paid for whichever kind a query reads, with the suite's
# inclusive bounds (q7's BETWEEN) and output columns. Each query runs
# RUNS times (default 5) with checkpoints every CHECKPOINT (default 10s,
# eddy's default) into a fresh state directory, results into a blackhole
# (q10: CSV files in a temporary directory). Prints a markdown table, per
# query median (min-max): wall time, events/s (EVENTS over the wall time),
# CPU used (user + sys), events per CPU-second ("per core"), peak memory;
# beside them Flink's published per-core figure (the Nexmark repository's
# table, README.md at 0c6d9cf: Flink 1.13 on 3 workers of 8 cores,
# parallelism 8, RocksDB with incremental exactly-once checkpoints every 3
# minutes, mini-batch on), not measured here and not divided by:
# bench/nexmark_flink.sh runs Flink here.
#
#   bench/nexmark.sh                                   # 10,000,000 events, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/nexmark.sh
#   QUERIES="q0 q5" EVENTS=1000000 RUNS=5 bench/nexmark.sh
#   FORM=eddy bench/nexmark.sh                         # bench/nexmark/*.sql: per-kind
#                                                      # sources, only the read kind generated
#   README=1 ...                                       # also write the table into bench/README.md
#   MEMORY_LIMIT=1GiB QUERIES="q4 q9" bench/nexmark.sh # state past the limit spills
#                                                      # (--memory-limit, --spill-dir)
#
# TPS is the event-time rate the generator stamps (default 10,000,000 events
# per second, the suite's 100m workload); it sets how many windows the
# events span, not how fast they are read.
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-10000000}
TPS=${TPS:-10000000}
RUNS=${RUNS:-5}
CHECKPOINT=${CHECKPOINT:-10s}
FORM=${FORM:-suite}
if [ "$FORM" = suite ]; then
  QUERIES=${QUERIES:-q0 q1 q2 q3 q4 q5 q7 q8 q9 q10 q11 q12 q13 q15 q16 q17 q18 q19 q20 q21 q22 q23}
else
  QUERIES=${QUERIES:-q0 q1 q2 q3 q4 q5 q7 q8 q9}
fi
. bench/lib.sh
# lib.sh pins one instance per keyed operator; here eddy runs as users run it.
[ -n "${PARALLELISM:-}" ] || unset EDDY_PARALLELISM
build_eddy

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command_line="$(for v in PROFILE FORM EVENTS TPS RUNS CHECKPOINT QUERIES PARALLELISM MEMORY_LIMIT; do [ -z "${!v:-}" ] || printf '%s="%s" ' "$v" "${!v}"; done)bench/nexmark.sh"
{
  echo "\`$command_line\` on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%d):"
  echo "Nexmark in the $FORM form, $EVENTS events at $TPS events/s of event time, generated in the process, eddy profile $PROFILE at ${PARALLELISM:-one instance per core (its default)}${PARALLELISM:+ instance(s) per keyed operator}, checkpoints every $CHECKPOINT${MEMORY_LIMIT:+, --memory-limit $MEMORY_LIMIT (state past it spills to disk)}, median (min-max) of $RUNS runs:"
} > "$work/heading"

run_once() {
  local q=$1
  rm -rf "$work/state" "$work/out" "$work/spill"
  local args limit=()
  [ -z "${MEMORY_LIMIT:-}" ] || limit=(--memory-limit "$MEMORY_LIMIT" --spill-dir "$work/spill")
  if [ "$FORM" = suite ]; then
    args=(bench/nexmark/flink/ddl.sql "bench/nexmark/flink/$q.sql"
      --set "TPS=$TPS" --set "EVENTS_NUM=$EVENTS"
      --set PERSON_PROPORTION=1 --set AUCTION_PROPORTION=3 --set BID_PROPORTION=46)
    if [ "$q" = q10 ]; then
      args+=(--set "NEXMARK_DIR=$work/out" --set SUBMIT_TIME=run)
    fi
  else
    args=("bench/nexmark/$q.sql" --set "EVENTS=$EVENTS" --set "RATE=$TPS")
  fi
  /usr/bin/time -f "$q %e %U %S %M" -o "$work/time" \
    "$EDDY" run --quiet "${args[@]}" "${limit[@]}" \
      --state-dir "$work/state" --checkpoint-interval "$CHECKPOINT" > /dev/null
  cat "$work/time" >> "$work/runs"
  echo "$q: $(cat "$work/time")" >&2
}

for q in $QUERIES; do
  if [ "$FORM" != suite ] && [ ! -f "bench/nexmark/$q.sql" ]; then
    continue
  fi
  for _ in $(seq "$RUNS"); do run_once "$q"; done
done

python3 bench/nexmark_suite_table.py "$work/heading" "$work/runs" "$EVENTS" > "$work/table.md"
cat "$work/table.md"
if [ -n "${README:-}" ]; then
  readme_section nexmark.sh "$work/table.md"
fi
