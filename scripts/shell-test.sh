#!/usr/bin/env bash
# The SQL shell (`eddy sql`) in a real terminal: tmux runs it, this script
# types into it (send-keys) and reads the screen (capture-pane). It defines
# a table over the generator (a statement over three lines), watches a
# window query's table update in place, interrupts it with Ctrl-C, starts
# an INSERT job, lists and stops it, explains a query and quits; the
# history file keeps what was typed. Then the same against a real
# `eddy serve` (`eddy sql --server URL`): the SELECT runs as the server's
# job, tailed into the live table and deleted on Ctrl-C; the INSERT is a
# server job, listed and stopped by id. Installs Debian's tmux on first use.
# Saves the screens under SHELL_TEST_OUT (default
# $CARGO_TARGET_DIR/shell-test); UPDATE_DOCS=1 also refreshes
# docs/sql-shell.txt, the capture docs/SERVICE.md shows.
#
#   scripts/shell-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

EDDY=${EDDY:-${CARGO_TARGET_DIR:-target}/debug/eddy}
[ -x "$EDDY" ] || cargo build -q --workspace --bin eddy
EDDY=$(cd "$(dirname "$EDDY")" && pwd)/$(basename "$EDDY")
sudo_if_needed() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v tmux >/dev/null; then
  echo "shell-test: installing Debian's tmux" >&2
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null
fi
OUT=${SHELL_TEST_OUT:-${CARGO_TARGET_DIR:-target}/shell-test}
mkdir -p "$OUT"

work=$(mktemp -d)
session="eddy-shell-$$"
# Each part runs on a tmux server of its own (a socket per part): a new
# session started just as the last one is killed can reach the exiting
# server, and tmux then fails with "server exited unexpectedly".
socket="eddy-shell-$$-local"
tmux() { command tmux -L "$socket" "$@"; }
server=""
cleanup() {
  tmux kill-server 2>/dev/null || true
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
tmux -f /dev/null new-session -d -s "$session" -x 110 -y 40 \
  "cd '$work' && '$EDDY' sql --history '$work/history' --output '$work/out' --rows 8; sleep 30"

screen() { tmux capture-pane -p -t "$session"; }
# Types a line and Enter (a trailing ';' is escaped: tmux reads it as a
# command separator).
send() {
  local text=$1
  if [ "${text: -1}" = ";" ]; then
    tmux send-keys -t "$session" -l "${text%;}"
    tmux send-keys -t "$session" '\;'
  else
    tmux send-keys -t "$session" -l "$text"
  fi
  tmux send-keys -t "$session" Enter
}
# Waits until the screen shows TEXT (a grep -E pattern), up to 30 s.
wait_for() {
  for _ in $(seq 300); do
    if screen | grep -qE "$1"; then return 0; fi
    sleep 0.1
  done
  echo "shell-test: the screen never showed '$1':" >&2
  screen >&2
  exit 1
}
fail() { echo "shell-test: $1" >&2; screen >&2; exit 1; }

wait_for '^eddy>'
send "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT,"
send "  country VARCHAR, event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,"
send "  WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND) WITH (connector = 'generator', stream = 'orders', rate = '50', realtime = 'true', count = '100000', batch_size = '10');"
wait_for 'ok \(1 definitions in the session\)'
tmux send-keys -t "$session" C-l
send "SELECT window_start, country, count(*) AS n, round(sum(order_amount), 2) AS total FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '2' SECOND)) GROUP BY window_start, window_end, country;"
wait_for 'window_start .* country .* n .* total'
wait_for '^[1-9][0-9]* rows.*received'
first=$(screen | grep -E '^[0-9]+ rows' | grep -oE '[0-9]+ received' | cut -d' ' -f1)
sleep 4
# The screen without its blank bottom lines.
screen | awk '{ line[NR] = $0 } END { n = NR; while (n > 0 && line[n] == "") n--; for (i = 1; i <= n; i++) print line[i] }' > "$OUT/sql-shell.txt"
second=$(screen | grep -E '^[0-9]+ rows' | grep -oE '[0-9]+ received' | cut -d' ' -f1)
[ "$second" -gt "$first" ] || fail "the table did not grow ($first then $second rows received)"
headers=$(screen | grep -cE 'window_start .* country' || true)
[ "$headers" = 1 ] || fail "the table was drawn $headers times, not redrawn in place"
tmux send-keys -t "$session" C-c
wait_for '^query stopped'
wait_for '^eddy>$'

send "CREATE TABLE big_orders (order_id VARCHAR, order_amount DOUBLE) WITH (connector = 'ndjson', path = 'big_orders.ndjson');"
wait_for 'ok \(2 definitions'
send "INSERT INTO big_orders SELECT order_id, order_amount FROM orders WHERE order_amount > 100;"
wait_for 'started job 1'
sleep 2
send "SHOW JOBS;"
wait_for '│ 1 .* running .* INSERT INTO big_orders'
send "STOP JOB 1;"
wait_for 'job 1: stopped'
[ -s "$work/out/big_orders.ndjson" ] || fail "the stopped job wrote nothing"
send "EXPLAIN SELECT country, count(*) FROM orders GROUP BY country;"
wait_for 'updating_aggregate'
send "SELECT nope FROM orders;"
wait_for "^error: .*nope"
send '\quit'
wait_for '^$'
for _ in $(seq 50); do [ -s "$work/history" ] && break; sleep 0.1; done
grep -q 'SHOW JOBS;' "$work/history" || fail "the history file lacks what was typed"

local_first=$first local_second=$second

# The same against a server.
. scripts/serve-lib.sh
start_server "$EDDY" "$work/serve" --checkpoint-interval 1s
tmux kill-server 2>/dev/null || true
socket="eddy-shell-$$-server"
tmux -f /dev/null new-session -d -s "$session" -x 110 -y 40 \
  "cd '$work' && '$EDDY' sql --server '$base' --history '$work/history2' --rows 8; sleep 30"
jobs_json() { curl -sf "$base/api/v1/jobs"; }
wait_for "^Jobs run on the server at $base"
send "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR, event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED, WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND) WITH (connector = 'generator', stream = 'orders', rate = '50', realtime = 'true', count = '100000', batch_size = '10');"
wait_for 'ok \(1 definitions in the session\)'
tmux send-keys -t "$session" C-l
send "SELECT window_start, country, count(*) AS n FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '2' SECOND)) GROUP BY window_start, window_end, country;"
wait_for 'window_start .* country .* n'
wait_for '^[1-9][0-9]* rows.*received'
jobs_json | grep -q '"name":"sql-shell-select","state":"running"' || jobs_json | grep -q 'sql-shell-select' || fail "the SELECT is no job of the server's: $(jobs_json)"
first=$(screen | grep -E '^[0-9]+ rows' | grep -oE '[0-9]+ received' | cut -d' ' -f1)
sleep 4
screen | awk '{ line[NR] = $0 } END { n = NR; while (n > 0 && line[n] == "") n--; for (i = 1; i <= n; i++) print line[i] }' > "$OUT/sql-shell-server.txt"
second=$(screen | grep -E '^[0-9]+ rows' | grep -oE '[0-9]+ received' | cut -d' ' -f1)
[ "$second" -gt "$first" ] || fail "the served table did not grow ($first then $second rows received)"
tmux send-keys -t "$session" C-c
wait_for '^query stopped'
wait_for '^eddy>$'
! jobs_json | grep -q 'sql-shell-select' || fail "the SELECT's job is still on the server: $(jobs_json)"

send "CREATE TABLE big_orders (order_id VARCHAR, order_amount DOUBLE) WITH (connector = 'ndjson', path = 'big_orders.ndjson');"
wait_for 'ok \(2 definitions'
send "INSERT INTO big_orders SELECT order_id, order_amount FROM orders WHERE order_amount > 100;"
wait_for 'started job [a-z0-9]+ on '
id=$(screen | sed -n 's/.*started job \([a-z0-9]*\) on .*/\1/p' | tail -1)
sleep 2
send "SHOW JOBS;"
wait_for "$id +sql-shell +running"
send "STOP JOB $id;"
wait_for "job $id: stopped"
[ -s "$work/serve/out/big_orders.ndjson" ] || fail "the server's job wrote nothing"
send "SELECT nope FROM orders;"
wait_for "^error: .*nope"
send '\quit'
wait_for '^$'

if [ "${UPDATE_DOCS:-}" = 1 ]; then
  cp "$OUT/sql-shell.txt" docs/sql-shell.txt
fi
echo "shell-test: passed (live table grew from $local_first to $local_second rows received, on the server from $first to $second; screens in $OUT)"
