#!/usr/bin/env bash
# State past memory on eddy and Apache Flink 1.20 side by side: eddy
# spilling to its store (fjall) under --memory-limit against Flink with its
# RocksDB state backend, and both with state in memory (eddy without a
# limit, Flink's hashmap backend), over the same NDJSON files
# (bench/spill_input.py), from the same SQL files (bench/spill/, Flink SQL
# that eddy runs as it is). The queries (QUERIES, default both):
#   group  count, sum and mean per key over EVENTS events on KEYS keys drawn
#          uniformly (an updating aggregate: every key's row stays in state)
#   join   orders LEFT JOIN payments ON id: EVENTS/2 orders and EVENTS/2
#          payments on orders drawn uniformly (an updating join: every row
#          of both sides stays in state)
# Keys drawn uniformly are the worst case for a hot set in memory: with a
# tenth of the state in memory, nine rows in ten find their key on disk.
#
# For each query, eddy runs it once without a limit to size its state; the
# limit (LIMIT, default a tenth of that state) then gives two forms:
#   "QUERY, in memory"      eddy without a limit; Flink's hashmap backend
#   "QUERY, past LIMIT"     eddy --memory-limit LIMIT (spilling); Flink's
#                           RocksDB backend (incremental checkpoints off, as
#                           none are taken) at its default memory (managed
#                           memory: RocksDB's block cache and memtables), or
#                           at FLINK_ROCKSDB_MEMORY
#                           (state.backend.rocksdb.memory.fixed-per-slot)
# Each form is checked by value first (bench/lib.sh check_values: each
# engine writes its Debezium changes, replayed to the final rows and
# compared, failing on a difference: the spilled eddy's rows against
# Flink's RocksDB rows), then RUNS timed runs alternate (bench/lib.sh
# alternate_runs: eddy a process per run, Flink one warm JVM). Both run one
# instance of the operator (Flink parallelism 1; eddy one instance per keyed
# operator), no checkpoints; Flink in its best form for updating queries:
# mini-batches (1 s or 5,000 rows). Prints the side-by-side table (events/s,
# events per CPU-second, peak memory per job), then each engine's speed
# past the limit over its speed in memory.
#
# At 2M events, Flink with RocksDB had not finished the join's first run
# after 18 minutes (bench/README.md); QUERIES=group runs the aggregate alone.
#
#   bench/spill_flink.sh                                    # 2M events, 400k keys, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/spill_flink.sh
#   EVENTS=100000 KEYS=20000 RUNS=1 bench/spill_flink.sh    # a check
#   README=1 ...                                            # also write the table into bench/README.md
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-2000000}
KEYS=${KEYS:-400000}
RUNS=${RUNS:-3}
QUERIES=${QUERIES:-group join}
. bench/lib.sh
build_eddy
flink_env

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

command_line="$(for v in PROFILE EVENTS KEYS RUNS QUERIES LIMIT FLINK_ROCKSDB_MEMORY FLINK_HEAP; do [ -z "${!v:-}" ] || printf '%s="%s" ' "$v" "${!v}"; done)bench/spill_flink.sh"
{
  echo "\`$command_line\` on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), $(free -g | awk '/^Mem:/ { print $2 }') GiB, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%d):"
  echo "$EVENTS events as NDJSON, keys drawn uniformly (group: $KEYS keys); eddy profile $PROFILE, one instance per keyed operator, its limit a tenth of its unlimited state unless LIMIT is given; Flink 1.20.0 (PyFlink, Java 17, local MiniCluster, JVM heap ${FLINK_HEAP:-the JVM default}) at parallelism 1, mini-batch on, RocksDB at ${FLINK_ROCKSDB_MEMORY:-its default managed memory}; no checkpoints; median (min-max) of $RUNS alternating runs, Flink's warm:"
} > "$work/heading"

for q in $QUERIES; do
  case $q in
    group) kind=updating_aggregate inputs=(events) ;;
    join) kind=updating_join inputs=(orders payments) ;;
    *) echo "QUERIES: '$q' is neither group nor join" >&2; exit 2 ;;
  esac
  rm -rf "$work/input"
  mkdir -p "$work/input"
  python3 bench/spill_input.py "$work/input" "$q" "$KEYS" "$EVENTS"
  sql_files=()
  eddy_base=()
  flink_base=(flink:parallelism.default=1 flink:table.exec.mini-batch.enabled=true
    flink:table.exec.mini-batch.allow-latency=1s flink:table.exec.mini-batch.size=5000)
  for input in "${inputs[@]}"; do
    # Flink reads a directory (one file: one reader); eddy the file.
    mkdir -p "$work/input/flink-$input"
    ln "$work/input/$input.ndjson" "$work/input/flink-$input/part-0"
    sql_files+=("bench/spill/$input.sql")
    variable=$(tr '[:lower:]' '[:upper:]' <<<"$input")_PATH
    eddy_base+=(--set "$variable=$work/input/$input.ndjson")
    flink_base+=("$variable=$work/input/flink-$input")
  done
  sql_files+=("bench/spill/$q.sql")

  # The limit: a tenth of the unlimited run's state, unless given.
  "$EDDY" run "${sql_files[@]}" "${eddy_base[@]}" > /dev/null 2> "$work/summary" \
    || { cat "$work/summary" >&2; exit 1; }
  state=$(grep "^$kind#" "$work/summary" | sed -nE 's/.*in state \(at most [0-9]+; ([0-9.]+) MiB, at most ([0-9.]+) MiB\).*/\2/p')
  limit_kib=${LIMIT:+$(numfmt --from=iec-i --to-unit=1024 "${LIMIT%B}")}
  limit_kib=${limit_kib:-$(awk -v s="$state" 'BEGIN { printf "%d", s * 1024 / 10 }')}
  echo "$q: eddy's unlimited state $state MiB; limit ${limit_kib} KiB" >&2

  name="$q, in memory"
  eddy_flags=("${eddy_base[@]}")
  flink_vars=("${flink_base[@]}" flink:state.backend.type=hashmap)
  printf '%s\tevents\t{"events":%s}\n' "$name" "$EVENTS" >> "$work/runs.tsv"
  check_values "$name" || continue
  alternate_runs "$name"

  name="$q, past $((limit_kib / 1024)).$(((limit_kib % 1024) * 10 / 1024)) MiB"
  eddy_flags=("${eddy_base[@]}" --memory-limit "${limit_kib}KiB" --spill-dir "$work/spill")
  flink_vars=("${flink_base[@]}" flink:state.backend.type=rocksdb flink:state.backend.incremental=false)
  [ -z "${FLINK_ROCKSDB_MEMORY:-}" ] \
    || flink_vars+=("flink:state.backend.rocksdb.memory.fixed-per-slot=$FLINK_ROCKSDB_MEMORY")
  printf '%s\tevents\t{"events":%s}\n' "$name" "$EVENTS" >> "$work/runs.tsv"
  check_values "$name" || continue
  alternate_runs "$name"
  # The last timed run's summary: eddy did spill.
  spilled=$(grep "^$kind#" "$work/eddy.log" | sed -nE 's/.*spilled ([0-9.]+) MiB to disk.*and read ([0-9.]+) MiB back.*/\1 \2/p')
  [ -n "$spilled" ] || { echo "$name: eddy did not spill under its limit" >&2; cat "$work/eddy.log" >&2; exit 1; }
  echo "$name: eddy spilled $(cut -d' ' -f1 <<<"$spilled") MiB and read $(cut -d' ' -f2 <<<"$spilled") MiB back" | tee -a "$work/notes" >&2
done

python3 bench/side_by_side_table.py "$work/heading" "$work/runs.tsv" > "$work/table.md"
# Each engine's speed past the limit over its speed in memory (medians).
python3 - "$work/runs.tsv" >> "$work/table.md" <<'PY'
import collections, json, statistics, sys
times = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    query, kind, figures = line.rstrip("\n").split("\t", 2)
    if kind in ("eddy", "flink"):
        seconds = json.loads(figures)["wall_seconds" if kind == "eddy" else "net_seconds"]
        times[query.split(",")[0]].setdefault((query, kind), []).append(seconds)
print()
for q, forms in times.items():
    memory = {kind: statistics.median(s) for (name, kind), s in forms.items() if name.endswith("in memory")}
    past = {kind: statistics.median(s) for (name, kind), s in forms.items() if not name.endswith("in memory")}
    if len(memory) == 2 and len(past) == 2:
        print(f"- {q}: past the limit, eddy runs at {memory['eddy'] / past['eddy']:.2f}x its in-memory speed, "
              f"Flink with RocksDB at {memory['flink'] / past['flink']:.2f}x its speed with heap state.")
PY
[ ! -f "$work/notes" ] || sed 's/^/- /' "$work/notes" >> "$work/table.md"
cat "$work/table.md"
if [ -n "${README:-}" ]; then
  readme_section spill_flink.sh "$work/table.md"
fi
