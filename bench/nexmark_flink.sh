#!/usr/bin/env bash
# Nexmark on eddy and Apache Flink 1.20 side by side, on this machine, over
# the same events, with the same SQL text:
#
# 1. eddy writes EVENTS events of the suite's stream (bench/nexmark/flink/
#    ddl.sql and events.sql: person, auction and bid in the suite's 1:3:46,
#    TPS events per second of event time) to one NDJSON file, once, before
#    any timer.
# 2. For each query, both engines run the suite's query text
#    (bench/nexmark/flink/QUERY.sql, from the Nexmark repository's
#    nexmark-flink/src/main/resources/queries/) over ddl_file.sql, the
#    suite's DDL reading that file:
#    - check: each runs it once with its blackhole sink made a file sink of
#      Debezium change events; what each wrote is replayed to its final
#      rows and compared by value (bench/compare_outputs.py: sorted, floats
#      within 1e-9), and the script fails on any difference. q10 writes CSV
#      files (compared by value with their partition directories). q12
#      windows by processing time, so its rows depend on how fast the run
#      goes: its counts are printed, not compared. q18 keeps one of the bids
#      tied on its ORDER BY, which SQL leaves open: its key and time are
#      compared. A query Flink fails to run is reported as such in the
#      table.
#    - RUNS timed runs (default 5), alternating: eddy, a process per run
#      (`eddy run`, whole process timed, at its default flags), then Flink,
#      one JVM per query kept between runs, which runs the query once
#      before the timed runs (its cold run, shown apart) so that the timed
#      ones are warm, and is stopped (SIGSTOP) while eddy's run goes.
#      Flink's time is the job's net runtime as Flink
#      reports it (JVM start and planning left out), its CPU the JVM's over
#      the job (every thread: tasks, JIT, GC).
#    Both checkpoint every CHECKPOINT (default 10s) to a local directory,
#    with results into a blackhole (q10: CSV files), and the checkpoints
#    each run completed are counted (eddy's job summary; Flink's JVM log).
#    Flink runs as the suite configures it (config.yaml: mini-batch 2 s /
#    50,000 rows, split distinct aggregation, no final checkpoint), at
#    FLINK_PARALLELISM (default: the number of cores, as eddy runs one
#    instance per core) reading one file per parallel reader (the lines
#    dealt round-robin), once per state backend in FLINK_STATES (default
#    both: rocksdb, the suite's, with incremental checkpoints; hashmap, rows
#    "QUERY, heap state").
# 3. Prints a markdown table: per query, rows out, events/s for each (EVENTS
#    over the median time, min-max), events per CPU-second ("per core") for
#    each, eddy's over Flink's, Flink's published per-core figure, and peak
#    resident memory per job (eddy's process; Flink's whole JVM, a
#    MiniCluster with its heap and off-heap pools, its high-water mark
#    reset as each job starts); with FIND_HEAP=1, the smallest heap Flink
#    runs each query in.
#
#   bench/nexmark_flink.sh                           # 1,000,000 events, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/nexmark_flink.sh
#   QUERIES="q0 q5" EVENTS=100000 RUNS=1 bench/nexmark_flink.sh
#   README=1 ...                                     # also write the table into bench/README.md
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-1000000}
TPS=${TPS:-10000000}
RUNS=${RUNS:-5}
CHECKPOINT=${CHECKPOINT:-10s}
QUERIES=${QUERIES:-q0 q1 q2 q3 q4 q5 q7 q8 q9 q10 q11 q12 q13 q15 q16 q17 q18 q19 q20 q21 q22 q23}
FLINK_PARALLELISM=${FLINK_PARALLELISM:-$(nproc)}
FLINK_STATES=${FLINK_STATES:-rocksdb hashmap}
. bench/lib.sh
# lib.sh pins one instance per keyed operator; here eddy runs as users run it.
[ -n "${PARALLELISM:-}" ] || unset EDDY_PARALLELISM
build_eddy
flink_env

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
events_file=$work/events.ndjson
"$EDDY" run --quiet bench/nexmark/flink/ddl.sql bench/nexmark/flink/events.sql \
  --set "TPS=$TPS" --set "EVENTS_NUM=$EVENTS" \
  --set PERSON_PROPORTION=1 --set AUCTION_PROPORTION=3 --set BID_PROPORTION=46 \
  --set "EVENTS_FILE=$events_file" > /dev/null
echo "events: $EVENTS in $events_file ($(du -m "$events_file" | cut -f1) MiB)" >&2
# Flink reads the same lines as one file per parallel reader (the suite's
# splits = cores), dealt round-robin so each file spans the whole stream in
# time order (see bench/flink.sh).
mkdir -p "$work/events"
split -n "r/$FLINK_PARALLELISM" -d "$events_file" "$work/events/part-"

command_line="$(for v in PROFILE EVENTS TPS RUNS CHECKPOINT QUERIES PARALLELISM FLINK_PARALLELISM FLINK_STATES FLINK_HEAP FIND_HEAP; do [ -z "${!v:-}" ] || printf '%s="%s" ' "$v" "${!v}"; done)bench/nexmark_flink.sh"
{
  echo "\`$command_line\` on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), $(free -g | awk '/^Mem:/ { print $2 }') GiB, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%d):"
  echo "$EVENTS events (person:auction:bid 1:3:46, $TPS events/s of event time) read from NDJSON (eddy one file, Flink one file per parallel reader); eddy profile $PROFILE at ${PARALLELISM:-one instance per core (its default)}${PARALLELISM:+ instance(s) per keyed operator}; Flink 1.20.0 (PyFlink, Java 17, local MiniCluster, JVM heap ${FLINK_HEAP:-the JVM default}) at parallelism $FLINK_PARALLELISM with the suite's settings (mini-batch 2 s / 50,000 rows, split distinct aggregation, no final checkpoint), RocksDB state with incremental checkpoints (\"heap state\": the hashmap backend); checkpoints every $CHECKPOINT on both; median (min-max) of $RUNS alternating runs, Flink's warm:"
} > "$work/heading"

flink_settings=("flink:parallelism.default=$FLINK_PARALLELISM"
  "flink:execution.checkpointing.interval=$CHECKPOINT"
  # The suite's own settings (nexmark-flink/src/main/resources/conf/config.yaml).
  flink:table.exec.mini-batch.enabled=true flink:table.exec.mini-batch.allow-latency=2s
  flink:table.exec.mini-batch.size=50000 flink:table.optimizer.distinct-agg.split.enabled=true
  flink:execution.checkpointing.checkpoints-after-tasks-finish.enabled=false)

for state in $FLINK_STATES; do
  case $state in
    rocksdb) suffix= state_settings=(flink:state.backend.type=rocksdb flink:state.backend.incremental=true) ;;
    hashmap) suffix=", heap state" state_settings=(flink:state.backend.type=hashmap) ;;
    *) echo "FLINK_STATES: '$state' is neither rocksdb nor hashmap" >&2; exit 2 ;;
  esac
  for q in $QUERIES; do
    name=$q$suffix
    sql_files=(bench/nexmark/flink/ddl_file.sql "bench/nexmark/flink/$q.sql")
    eddy_flags=(--set "EVENTS_FILE=$events_file" --state-dir "$work/eddy-run/state" --checkpoint-interval "$CHECKPOINT")
    flink_vars=("EVENTS_FILE=$work/events" "flink:state.checkpoints.dir=file://$work/flink-state"
      "${flink_settings[@]}" "${state_settings[@]}")
    out=()
    if [ "$q" = q10 ]; then
      # q10 writes CSV files: their lines are its rows.
      eddy_flags+=(--set "NEXMARK_DIR=$work/q10" --set SUBMIT_TIME=run)
      flink_vars+=("NEXMARK_DIR=$work/q10" SUBMIT_TIME=run)
      out=("$work/q10")
    fi
    compare_columns=
    if [ "$q" = q18 ]; then
      # The last bid per bidder and auction: at the suite's rate many bids
      # share a millisecond, and which of the tied bids is kept is left open
      # by SQL; Flink keeps the last to arrive, eddy ranks ties by the rows'
      # own values (docs/SQL.md). The bid's key and time are compared.
      compare_columns=auction,bidder,dateTime
    fi
    printf '%s\tevents\t{"events":%s}\n' "$name" "$EVENTS" >> "$work/runs.tsv"
    rm -rf "$work/eddy-run" "$work/flink-state"
    mkdir -p "$work/eddy-run"
    check_values "$name" "${out[@]}" || continue
    smallest_heap "$name"
    rm -rf "$work/flink-state"
    alternate_runs "$name"
  done
done

python3 bench/side_by_side_table.py "$work/heading" "$work/runs.tsv" nexmark > "$work/table.md"
cat "$work/table.md"
if [ -n "${README:-}" ]; then
  readme_section nexmark_flink.sh "$work/table.md"
fi
