#!/usr/bin/env bash
# Nexmark: each query of bench/nexmark/ over EVENTS generated events
# (the nexmark source, 1 person : 3 auctions : 46 bids; a query reads the
# streams it names), results into a blackhole. Prints per query: wall
# time, events/s (all EVENTS events over the wall time, as Nexmark counts
# a source that generates every kind), the CPU it used (user + sys), events
# per CPU-second ("per core"), peak memory, and Flink's published per-core
# figure where there is one (q0 379k, q5 75k, q7 23k, q8 162k events/s)
# with the ratio.
#
#   bench/nexmark.sh                                   # 10,000,000 events, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/nexmark.sh
#   QUERIES="q0 q5" EVENTS=1000000 bench/nexmark.sh
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-10000000}
QUERIES=${QUERIES:-q0 q1 q2 q3 q4 q5 q7 q8 q9}
. bench/lib.sh
build_eddy

declare -A flink=([q0]=379000 [q5]=75000 [q7]=23000 [q8]=162000)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "nexmark: $EVENTS events, profile $PROFILE, $(nproc) cores"
printf "%-5s %9s %13s %9s %15s %10s %14s\n" query wall events/s cpu-s "events/cpu-s" "peak MiB" "vs Flink/core"
for q in $QUERIES; do
  /usr/bin/time -f "%e %U %S %M" -o "$work/time" \
    "$EDDY" run --quiet "bench/nexmark/$q.sql" --set "EVENTS=$EVENTS" > /dev/null
  read -r wall user sys peak_kb < "$work/time"
  awk -v q="$q" -v n="$EVENTS" -v w="$wall" -v u="$user" -v s="$sys" -v m="$peak_kb" -v f="${flink[$q]:-0}" 'BEGIN {
    cpu = u + s; per_core = n / cpu
    vs = f > 0 ? sprintf("%.1fx", per_core / f) : "-"
    printf "%-5s %8.2fs %13.0f %9.2f %15.0f %10.1f %14s\n", q, w, n / w, cpu, per_core, m / 1024, vs
  }'
done
