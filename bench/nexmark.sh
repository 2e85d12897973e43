#!/usr/bin/env bash
# Nexmark as the suite defines it: the suite's DDL and query texts
# (bench/nexmark/flink/: one `datagen` table of every event, 1 person : 3
# auctions : 46 bids, and a view per kind), so every one of EVENTS events is
# generated and paid for whichever kind a query reads, with the suite's
# inclusive bounds (q7's BETWEEN) and output columns. Each query runs
# RUNS times (default 3) with checkpoints every CHECKPOINT (default 10s,
# eddy's default) into a fresh state directory, results into a blackhole
# (q10: CSV files in a temporary directory). Prints per query the median
# run: wall time, events/s (EVENTS over the wall time), CPU used (user +
# sys), events per CPU-second ("per core"), peak memory; and Flink's
# published per-core figure with the ratio: the Nexmark repository's table
# (README.md at 0c6d9cf: Flink 1.13 on 3 workers of 8 cores, parallelism 8,
# RocksDB with incremental exactly-once checkpoints every 3 minutes,
# mini-batch on), not measured here; bench/nexmark_flink.sh runs Flink here.
#
#   bench/nexmark.sh                                   # 10,000,000 events, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/nexmark.sh
#   QUERIES="q0 q5" EVENTS=1000000 RUNS=5 bench/nexmark.sh
#   FORM=eddy bench/nexmark.sh                         # bench/nexmark/*.sql: per-kind
#                                                      # sources, only the read kind generated
#
# TPS is the event-time rate the generator stamps (default 10,000,000 events
# per second, the suite's 100m workload); it sets how many windows the
# events span, not how fast they are read.
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-10000000}
TPS=${TPS:-10000000}
RUNS=${RUNS:-3}
CHECKPOINT=${CHECKPOINT:-10s}
FORM=${FORM:-suite}
if [ "$FORM" = suite ]; then
  QUERIES=${QUERIES:-q0 q1 q2 q3 q4 q5 q7 q8 q9 q10 q11 q12 q13 q15 q16 q17 q18 q19 q20 q21 q22 q23}
else
  QUERIES=${QUERIES:-q0 q1 q2 q3 q4 q5 q7 q8 q9}
fi
. bench/lib.sh
build_eddy

declare -A flink=([q0]=155020 [q1]=157940 [q2]=175210 [q3]=152120 [q4]=34330 [q5]=22140
  [q7]=12330 [q8]=146140 [q9]=14240 [q10]=57810 [q11]=39700 [q12]=75670 [q13]=130730
  [q15]=72420 [q16]=18650 [q17]=116800 [q18]=53700 [q19]=44040 [q20]=18980 [q21]=98490 [q22]=129960)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "nexmark ($FORM form): $EVENTS events at $TPS events/s of event time, profile $PROFILE, $(nproc) cores, commit $(git rev-parse --short HEAD), checkpoints every $CHECKPOINT, median of $RUNS"
printf "%-5s %9s %13s %9s %15s %10s %14s\n" query wall events/s cpu-s "events/cpu-s" "peak MiB" "vs Flink/core"

run_once() {
  local q=$1
  rm -rf "$work/state" "$work/out"
  local args
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
  /usr/bin/time -f "%e %U %S %M" -o "$work/time" \
    "$EDDY" run --quiet "${args[@]}" \
      --state-dir "$work/state" --checkpoint-interval "$CHECKPOINT" > /dev/null
  cat "$work/time"
}

for q in $QUERIES; do
  if [ "$FORM" != suite ] && [ ! -f "bench/nexmark/$q.sql" ]; then
    continue
  fi
  for _ in $(seq "$RUNS"); do run_once "$q"; done | sort -n | awk -v r="$RUNS" 'NR == int((r + 1) / 2)' > "$work/median"
  read -r wall user sys peak_kb < "$work/median"
  awk -v q="$q" -v n="$EVENTS" -v w="$wall" -v u="$user" -v s="$sys" -v m="$peak_kb" -v f="${flink[$q]:-0}" 'BEGIN {
    cpu = u + s; per_core = n / cpu
    vs = f > 0 ? sprintf("%.1fx", per_core / f) : "-"
    printf "%-5s %8.2fs %13.0f %9.2f %15.0f %10.1f %14s\n", q, w, n / w, cpu, per_core, m / 1024, vs
  }'
done
