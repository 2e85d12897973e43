#!/usr/bin/env bash
# Delta Lake sink against the Parquet sink: the reference pipeline's
# enrichment (sources + the payments/orders interval join) over EVENTS
# generated events (half orders, half payments), its enriched stream
# written as a streaming job does: checkpoints every CHECKPOINT (default
# 1s), exactly once, zstd Parquet files rolled at 128MB. Three sinks, each
# run RUNS times (default 5), alternating:
#
#   parquet        connector = 'parquet' (files committed per checkpoint)
#   delta          connector = 'delta'   (one Delta commit per checkpoint)
#   delta+optimize connector = 'delta', optimize_every = '10' (compaction)
#
# Per sink it prints the median run by rows/s with the min-max over runs:
# wall time (the whole `eddy run`), rows written, rows/s, files written per
# minute, and the files a reader lists at the end (the Parquet directory's
# files; the Delta table's live files). Every run's row count must be the
# same, or the script fails.
#
#   bench/delta.sh                                     # 10,000,000 events, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/delta.sh
#   EVENTS=200000 RUNS=1 bench/delta.sh                # a quick check
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-10000000}
RUNS=${RUNS:-5}
CHECKPOINT=${CHECKPOINT:-1s}
. bench/lib.sh
build_eddy

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
enrichment_input "$work"
echo "checkpoints every $CHECKPOINT; $RUNS runs per sink, alternating"
echo "machine: $(nproc) cores, $(uname -m); commit $(git rev-parse --short HEAD)"

# The enrichment with its sink declared as `$1`.
job() {
  sed "s|WITH (connector = 'stdout', tag = 'ENRICHED')|WITH ($1)|" queries/10_enrichment.sql
}
job "connector = 'parquet', path = 'out', rolling_bytes = '128MB'" > "$work/parquet.sql"
job "connector = 'delta', path = 'out'" > "$work/delta.sql"
job "connector = 'delta', path = 'out', optimize_every = '10'" > "$work/delta+optimize.sql"
grep -q "connector = 'delta'" "$work/delta.sql" || { echo "the sink was not replaced" >&2; exit 1; }

# One run of sink $1: prints "seconds rows files_written files_listed".
run_one() {
  local sink=$1 dir="$work/run"
  rm -rf "$dir" && mkdir -p "$dir"
  local start end summary
  start=$(date +%s.%N)
  summary=$(cd "$dir" && "$EDDY" run "$OLDPWD/queries/00_sources.sql" "$work/$sink.sql" \
    --input "orders=$work/orders.ndjson" --input "payments=$work/payments.ndjson" \
    --state-dir state --checkpoint-interval "$CHECKPOINT" 2>&1 >/dev/null)
  end=$(date +%s.%N)
  local rows written listed
  rows=$(sed -n 's/^sink enriched_payments: \([0-9]*\) rows written.*/\1/p' <<<"$summary")
  written=$(find "$dir/out" -name '*.parquet' -not -path '*/_delta_log/*' | wc -l)
  if [ "$sink" = parquet ]; then
    listed=$written
  else
    # Files a reader lists: the newest version's. The written ones include
    # those compaction replaced (still on disk: no vacuum here).
    listed=$("$PYTHON" - "$dir/out" <<'EOF'
import sys
from deltalake import DeltaTable
print(len(DeltaTable(sys.argv[1]).file_uris()))
EOF
)
    grep -q "^delta sink enriched_payments: " <<<"$summary" || { echo "$summary" >&2; exit 1; }
  fi
  [ -n "$rows" ] || { echo "$summary" >&2; exit 1; }
  echo "$(awk -v s="$start" -v e="$end" 'BEGIN { print e - s }') $rows $written $listed"
}

PYTHON=$(source scripts/python-env.sh && python_env deltalake==1.6.6 >&2 && echo "$VENV/bin/python")

sinks=(parquet delta delta+optimize)
for ((i = 0; i < RUNS; i++)); do
  for sink in "${sinks[@]}"; do
    # An assignment, so that a failed run fails the script.
    result=$(run_one "$sink")
    echo "$sink $result" >> "$work/runs"
    tail -1 "$work/runs" >&2
  done
done

rows=$(awk '{ print $3 }' "$work/runs" | sort -u)
if [ "$(wc -l <<<"$rows")" != 1 ]; then
  echo "ERROR: the sinks wrote different row counts: $(tr '\n' ' ' <<<"$rows")" >&2
  exit 1
fi
printf '%-15s %9s %11s %22s %17s %13s\n' sink "wall s" rows "rows/s (min-max)" "files/min" "files listed"
for sink in "${sinks[@]}"; do
  grep "^$sink " "$work/runs" | awk '{ print $3 / $2, $0 }' | sort -g | awk '
    { rate[NR] = $1; line[NR] = $0 }
    END {
      m = int((NR + 1) / 2); split(line[m], f, " ")
      printf "%-15s %9.2f %11d %10.0f (%.0f-%.0f) %17.1f %13d\n", f[2], f[3], f[4], rate[m], rate[1], rate[NR], f[5] / f[3] * 60, f[6]
    }'
done
