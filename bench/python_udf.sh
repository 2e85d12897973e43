#!/usr/bin/env bash
# Python functions: a tumbling 10 s window per customer over ROWS order rows
# summing a per-row value computed three ways, in turn RUNS times each:
#   builtin     order_amount * 1.1 + 2.0, DataFusion's arithmetic
#   vectorized  a Python function given whole pyarrow arrays per batch
#   row         a Python function called once per row (plain Python)
# Every run writes the same windows to an NDJSON file (checked equal across
# the three). Prints per variant the median (min-max) of events/s and the
# ratio of the medians to the built-in's, timed over the job's run and over
# the whole command.
#
#   bench/python_udf.sh                     # 2,000,000 rows, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/python_udf.sh
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-2000000}
RUNS=${RUNS:-5}
. bench/lib.sh
. scripts/python-env.sh
build_eddy
python_env pyarrow==26.0.1
export EDDY_PYTHON="$VENV/bin/python"

work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
"$EDDY" generate --stream orders --rate 1000 --count "$ROWS" > "$work/orders.ndjson"

job() { # NAME EXPRESSION [FUNCTION DECLARATION]
  cat > "$work/$1.sql" <<SQL
${3:-}
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '$work/orders.ndjson');
CREATE TABLE per_customer (window_start TIMESTAMP, customer_id VARCHAR, n BIGINT, total DOUBLE)
  WITH (connector = 'ndjson', path = 'per_customer.ndjson');
INSERT INTO per_customer
SELECT window_start, customer_id, count(*), round(sum($2), 2)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, customer_id;
SQL
}
job builtin "order_amount * 1.1 + 2.0"
job vectorized "taxed(order_amount)" "CREATE FUNCTION taxed(x DOUBLE) RETURNS DOUBLE LANGUAGE PYTHON WITH (vectorized = true) AS \$\$
import pyarrow.compute as pc
def taxed(x):
    return pc.add(pc.multiply(x, 1.1), 2.0)
\$\$;"
job row "taxed(order_amount)" "CREATE FUNCTION taxed(x DOUBLE) RETURNS DOUBLE LANGUAGE PYTHON AS \$\$
def taxed(x):
    return None if x is None else x * 1.1 + 2.0
\$\$;"
echo "input: $ROWS order rows ($(du -h "$work/orders.ndjson" | cut -f1) of NDJSON); profile $PROFILE; $RUNS runs each, in turn; commit $(git rev-parse --short HEAD); $(nproc) cores; $("$EDDY_PYTHON" --version), pyarrow $("$EDDY_PYTHON" -c 'import pyarrow; print(pyarrow.__version__)')"

# run NAME: prints the events/s of one run twice: over the job's run (the
# summary's "finished in": reading, computing, writing) and over the whole
# command (process start and planning too, where a job's first Python
# worker starts and loads its functions: pyarrow's import for the
# vectorized one).
run() {
  rm -rf "$work/out-$1"
  local err ms started ended
  started=$(date +%s%N)
  err=$("$EDDY" run "$work/$1.sql" --output "$work/out-$1" 2>&1 >/dev/null)
  ended=$(date +%s%N)
  ms=$(sed -n 's/^finished in \([0-9]*\) ms$/\1/p' <<<"$err")
  if [ -z "$ms" ]; then echo "unexpected summary: $err" >&2; exit 1; fi
  awk -v r="$ROWS" -v ms="$ms" -v ns="$((ended - started))" 'BEGIN { printf "%.0f %.0f\n", r / (ms / 1000), r / (ns / 1e9) }'
}

declare -A job whole
for ((i = 0; i < RUNS; i++)); do
  for name in builtin vectorized row; do
    read -r j w <<<"$(run $name)"
    job[$name]+="$j "
    whole[$name]+="$w "
  done
done
for name in vectorized row; do
  if ! cmp -s <(sort "$work/out-builtin/per_customer.ndjson") <(sort "$work/out-$name/per_customer.ndjson"); then
    echo "ERROR: the $name function's windows differ from the built-in's" >&2
    exit 1
  fi
done
median() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -n | awk '{ v[NR] = $1 } END { printf "%d (%d-%d)", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
echo "$(wc -l < "$work/out-builtin/per_customer.ndjson") windows written, the same by all three"
for timer in job whole; do
  declare -n results=$timer
  base=$(median "${results[builtin]}" | cut -d' ' -f1)
  [ $timer = job ] && echo "over the job's run:" || echo "over the whole command (start, planning, Python worker start):"
  for name in builtin vectorized row; do
    m=$(median "${results[$name]}")
    awk -v n="$name" -v m="$m" -v b="$base" 'BEGIN { split(m, p, " "); printf "  %-11s %s events/s  %.2fx the built-in\n", n, m, p[1] / b }'
  done
done
