# Shared by the benchmark drivers in bench/. Source it; it defines:
#   build_eddy        builds eddy in $PROFILE (default dev) and sets EDDY
#                     (or takes EDDY_BIN, a binary built before, as it is)
#   enrichment_input DIR
#                     writes EVENTS generated events for the enrichment join
#                     as DIR/orders.ndjson and DIR/payments.ndjson (half each)
#   field JSON NAME   the number NAME holds in an `eddy bench` JSON line
#   flink_env         Apache Flink 1.20 as PyFlink (apache-flink==1.20.0 from
#                     PyPI, in a virtual environment of its own, EDDY_FLINK_VENV)
#                     on Java 17 (Debian's openjdk-17-jre-headless, installed
#                     if missing); sets FLINK_PYTHON and exports JAVA_HOME
#                     (and JVM_ARGS=-Xmx$FLINK_HEAP where FLINK_HEAP is set)
#   flink_kafka_jars  Flink's Kafka connector jars (PyPI), sets FLINK_KAFKA_JARS
#   readme_section N F  writes file F into bench/README.md between <!-- N --> and <!-- /N -->
#
# Every eddy the benchmarks start runs PARALLELISM instances of each keyed
# operator (EDDY_PARALLELISM; default 1 here, where eddy's own default is one
# per core: on 2 cores one instance is the faster, see bench/README).

export EDDY_PARALLELISM=${PARALLELISM:-1}

build_eddy() {
  PROFILE=${PROFILE:-dev}
  # EDDY_BIN: benchmark that binary as it is (built earlier), no build.
  if [ -n "${EDDY_BIN:-}" ]; then
    EDDY=$(realpath "$EDDY_BIN")
    return
  fi
  if [ "$PROFILE" = dev ]; then
    cargo build -q -p eddy-cli
    EDDY=${CARGO_TARGET_DIR:-target}/debug/eddy
  else
    cargo build -q -p eddy-cli --profile "$PROFILE"
    EDDY=${CARGO_TARGET_DIR:-target}/$PROFILE/eddy
  fi
  # Absolute, so that drivers may run it from another directory.
  EDDY=$(realpath "$EDDY")
}

enrichment_input() {
  local half=$((EVENTS / 2))
  "$EDDY" generate --stream orders --rate 1000 --count "$half" > "$1/orders.ndjson"
  "$EDDY" generate --stream payments --rate 1000 --count "$half" > "$1/payments.ndjson"
  echo "input: $half orders + $half payments; profile $PROFILE"
}

field() { sed -E "s/.*\"$2\":([0-9.]+).*/\1/" <<<"$1"; }

# readme_section NAME FILE: replaces what bench/README.md holds between the
# lines `<!-- NAME -->` and `<!-- /NAME -->` with FILE, so the figures
# there are the ones the script printed.
readme_section() {
  local name=$1 file=$2 readme=bench/README.md
  grep -qx "<!-- $name -->" "$readme" || { echo "bench/README.md has no <!-- $name --> section" >&2; return 1; }
  awk -v start="<!-- $name -->" -v end="<!-- /$name -->" -v file="$file" '
    $0 == start { print; while ((getline line < file) > 0) print line; skip = 1; next }
    $0 == end { skip = 0 }
    !skip { print }' "$readme" > "$readme.new"
  mv "$readme.new" "$readme"
  echo "bench/README.md: section $name rewritten" >&2
}

flink_env() {
  local java17=/usr/lib/jvm/java-17-openjdk-amd64
  if [ ! -x "$java17/bin/java" ]; then
    if [ "$(id -u)" = 0 ]; then
      apt-get install -y -q openjdk-17-jre-headless >/dev/null
    else
      sudo apt-get install -y -q openjdk-17-jre-headless >/dev/null
    fi
  fi
  export JAVA_HOME=$java17
  # FLINK_HEAP (e.g. 512m): the MiniCluster JVM's heap (-Xmx), where the
  # JVM otherwise sizes it from the machine's memory.
  if [ -n "${FLINK_HEAP:-}" ]; then
    export JVM_ARGS="-Xmx$FLINK_HEAP"
  fi
  . scripts/python-env.sh
  python_env_pinned "${EDDY_FLINK_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/eddy-flink-venv}" apache-flink==1.20.0
  FLINK_PYTHON="$VENV/bin/python"
}

# flink_kafka_jars: Flink's Kafka connector and the Kafka client, for
# bench/kafka_flink.sh, taken from PyPI's shigawire-apache-flink-libraries
# (a redistribution of the Apache connector jars for PyFlink; its wheel's
# hash is checked) into a cache directory outside the clone. Sets
# FLINK_KAFKA_JARS (pipeline.jars). The connector is 4.0.1-2.0, built for
# Flink 2.0: its source (KafkaSource, the table factory) runs on Flink
# 1.20, which is all kafka_flink.sh uses; no release for 1.20 is on PyPI.
flink_kafka_jars() {
  local dir=${XDG_CACHE_HOME:-$HOME/.cache}/eddy-flink-kafka
  local wheel=shigawire_apache_flink_libraries-2.0.0.post1-py3-none-any.whl
  local sha256=aaa65537d3f0c0ff279185d8243024f0efd95788ba044bf249ba0f40b69289cd
  if [ ! -f "$dir/jars/flink-connector-kafka.jar" ] || [ ! -f "$dir/jars/kafka-clients.jar" ]; then
    mkdir -p "$dir"
    "$FLINK_PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps \
      shigawire-apache-flink-libraries==2.0.0.post1 -d "$dir" >&2
    echo "$sha256  $dir/$wheel" | sha256sum --check --quiet \
      || { echo "flink_kafka_jars: $wheel does not have the pinned hash" >&2; return 1; }
    rm -rf "$dir/jars" "$dir/unpacked"
    "$FLINK_PYTHON" -m zipfile -e "$dir/$wheel" "$dir/unpacked"
    mkdir -p "$dir/jars"
    mv "$dir/unpacked/pyflink/lib/flink-connector-kafka.jar" "$dir/unpacked/pyflink/lib/kafka-clients.jar" "$dir/jars/"
    rm -rf "$dir/unpacked" "$dir/$wheel"
  fi
  FLINK_KAFKA_JARS="file://$dir/jars/flink-connector-kafka.jar;file://$dir/jars/kafka-clients.jar"
}

# The side-by-side drivers (flink.sh, nexmark_flink.sh) run one query on
# eddy and Flink from the same SQL files. They set, per query:
#   sql_files     the SQL files, in order (tables, then the query)
#   eddy_flags    `eddy run` flags besides the files (--set NAME=VALUE, ...)
#   flink_vars    flink_sql.py's NAME=VALUE and flink:KEY=VALUE arguments
#   events        the events the query reads (for the rates)
# and $work, a scratch directory; records go to $work/runs.tsv as lines of
# query, kind and a JSON object (see bench/side_by_side_table.py).

# check_values Q [DIR]: runs the query once on each engine and compares what
# each wrote by value (bench/compare_outputs.py: the rows left after
# replaying the changes, sorted, floats within 1e-9). Every blackhole sink
# is made a file sink of Debezium change events (Flink's `filesystem` with
# `debezium-json`, which eddy runs as it is); with DIR, the query writes
# its own files there (Nexmark q10's CSV), and those are compared. Records
# both row counts and whether the values are equal. With compare_columns
# set (A,B,...), only those columns are compared (a query whose other
# columns SQL leaves open). A query Flink fails to run is recorded as such
# (kind flink-failed); returns 1 then.
check_values() {
  local q=$1 dir=${2:-} engine f why result
  local -A files=()
  rm -rf "$work/check"
  for engine in eddy flink; do
    mkdir -p "$work/check/$engine-sql"
    for f in "${sql_files[@]}"; do
      sed "s|'connector' = 'blackhole'|'connector' = 'filesystem', 'path' = '$work/check/$engine.out', 'format' = 'debezium-json'|" \
        "$f" > "$work/check/$engine-sql/$(basename "$f")"
      files[$engine]+=" $work/check/$engine-sql/$(basename "$f")"
    done
  done
  [ -z "$dir" ] || rm -rf "$dir"
  # shellcheck disable=SC2086 # the files' paths hold no spaces ($work is mktemp's)
  "$EDDY" run --quiet ${files[eddy]} "${eddy_flags[@]}" > /dev/null 2> "$work/eddy.log" \
    || { cat "$work/eddy.log" >&2; exit 1; }
  [ -z "$dir" ] || mv "$dir" "$work/check/eddy.out"
  # shellcheck disable=SC2086
  if ! "$FLINK_PYTHON" bench/flink_sql.py check "${flink_vars[@]}" -- ${files[flink]} \
    > /dev/null 2> "$work/flink-$q.log"; then
    tail -30 "$work/flink-$q.log" >&2
    why=$(flink_failure "$work/flink-$q.log")
    result=$(python3 bench/compare_outputs.py eddy "$work/check/eddy.out")
    printf '%s\tflink-failed\t{"eddy_rows":%s,"why":"%s"}\n' "$q" "$(field "$result" eddy_rows)" "$why" >> "$work/runs.tsv"
    return 1
  fi
  [ -z "$dir" ] || mv "$dir" "$work/check/flink.out"
  result=$(python3 bench/compare_outputs.py ${compare_columns:+--columns "$compare_columns"} \
    eddy "$work/check/eddy.out" flink "$work/check/flink.out" 2> "$work/check/differences") || true
  echo "$q check: $result" >&2
  sed 's/^/  /' "$work/check/differences" >&2
  printf '%s\tcheck\t%s\n' "$q" "$result" >> "$work/runs.tsv"
}
# flink_failure LOG: the first Flink exception's message in a PyFlink log
# (not py4j's wrapper), quotes and backslashes dropped.
flink_failure() {
  { grep -m1 -E 'org\.apache\.flink[A-Za-z0-9_.$]*(Exception|Error): ' "$1" \
      || grep -m1 -E '(Exception|Error): ' "$1"; } | sed -E 's/^[: ]*[A-Za-z0-9_.$]*(Exception|Error): //; s/\. .*/./' | cut -c1-160 | tr -d '"\\'
}
lines_under() { find "$1" -type f ! -name '.*' ! -name '_SUCCESS' -exec cat {} + 2>/dev/null | wc -l; }

# smallest_heap Q: with FIND_HEAP=1, the smallest JVM heap (-Xmx, MiB) at
# which Flink runs the query to its end, recorded as kind flink-heap: heaps
# double from 64 MiB until a run succeeds, then halve the gap to the last
# failure down to 1/8 of the heap. A probe is a fresh JVM running the query
# once into its blackhole, with no restarts (a task out of memory fails
# the job instead of restarting it) and at most 15 minutes.
smallest_heap() {
  [ "${FIND_HEAP:-}" = 1 ] || return 0
  local q=$1 low=0 high=64 mid
  flink_heap_runs() {
    JVM_ARGS="-Xmx${1}m" timeout 900 "$FLINK_PYTHON" bench/flink_sql.py check "${flink_vars[@]}" \
      flink:restart-strategy.type=none -- "${sql_files[@]}" > /dev/null 2> "$work/heap-$q.log"
  }
  until flink_heap_runs "$high"; do
    low=$high
    high=$((high * 2))
    if [ "$high" -gt 16384 ]; then
      echo "$q: Flink did not run within a 16 GiB heap" >&2
      return 0
    fi
  done
  while [ $((high - low)) -gt $((high / 8)) ]; do
    mid=$(((low + high) / 2))
    if flink_heap_runs "$mid"; then high=$mid; else low=$mid; fi
  done
  echo "$q: Flink's smallest heap: $high MiB (fails at $low MiB)" >&2
  printf '%s\tflink-heap\t{"heap_mib":%s,"fails_mib":%s}\n' "$q" "$high" "$low" >> "$work/runs.tsv"
}

# alternate_runs Q: RUNS timed runs of the query on each engine, in turn:
# eddy a process per run (`eddy run`, the whole process timed), Flink one
# JVM for all (flink_sql.py serve) that runs the query once first, its cold
# run, so that the timed ones are warm; then the JVM's peak memory. The
# waiting JVM is stopped (SIGSTOP, every process under flink_sql.py) while
# eddy runs, so neither engine's timed run shares the machine with the
# other: an idle JVM's collector and compiler threads, and its heap of
# several GiB, otherwise run beside eddy's timed process.
alternate_runs() {
  local q=$1 run line to_flink checkpoints
  # The JVM logs here, and the completed checkpoints are counted there.
  rm -rf "$work/flink-log"
  mkdir -p "$work/flink-log"
  coproc FLINK { FLINK_LOG_DIR=$work/flink-log exec "$FLINK_PYTHON" bench/flink_sql.py serve "${flink_vars[@]}" -- "${sql_files[@]}" 2> "$work/flink-$q.log"; }
  flink_says() { # COMMAND: its JSON line
    echo "$1" >&"${FLINK[1]}"
    local answer
    read -r answer <&"${FLINK[0]}" || { tail -30 "$work/flink-$q.log" >&2; exit 1; }
    echo "$answer"
  }
  line=$(flink_says run)
  printf '%s\tflink-cold\t%s\n' "$q" "$line" >> "$work/runs.tsv"
  for ((run = 1; run <= RUNS; run++)); do
    rm -rf "$work/eddy-run"
    mkdir -p "$work/eddy-run"
    signal_tree STOP "$FLINK_PID"
    /usr/bin/time -f '{"wall_seconds":%e,"user":%U,"sys":%S,"peak_kib":%M}' -o "$work/time" \
      "$EDDY" run "${sql_files[@]}" "${eddy_flags[@]}" > /dev/null 2> "$work/eddy.log" \
      || { signal_tree CONT "$FLINK_PID"; cat "$work/eddy.log" >&2; exit 1; }
    signal_tree CONT "$FLINK_PID"
    # The checkpoints the job summary (on stderr) says were taken.
    checkpoints=$(sed -nE 's/^checkpoints: ([0-9]+) taken.*/\1/p' "$work/eddy.log")
    sed -E "s/\}\s*$/,\"checkpoints\":${checkpoints:-0}}/" "$work/time" > "$work/time.json"
    mv "$work/time.json" "$work/time"
    printf '%s\teddy\t%s\n' "$q" "$(cat "$work/time")" >> "$work/runs.tsv"
    line=$(flink_says run)
    printf '%s\tflink\t%s\n' "$q" "$line" >> "$work/runs.tsv"
    echo "$q run $run: eddy $(cat "$work/time"), flink $line" >&2
  done
  line=$(flink_says peak)
  printf '%s\tflink-peak\t%s\n' "$q" "$line" >> "$work/runs.tsv"
  to_flink=${FLINK[1]}
  exec {to_flink}>&-
  wait "$FLINK_PID" || true
}

# signal_tree SIGNAL PID: sends SIGNAL to PID and every process under it.
signal_tree() {
  local pid
  for pid in $(pgrep -P "$2"); do signal_tree "$1" "$pid"; done
  kill "-$1" "$2" 2> /dev/null || true
}
