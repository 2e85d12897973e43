#!/usr/bin/env bash
# psycopg (Python's PostgreSQL driver, in eddy's Python environment) against
# `eddy serve --pg-addr`: the checks of tests/pg_wire.rs's psycopg test.
#
#   scripts/pg-client.py.sh HOST PORT EXPECTED.json
#
# Declares the orders file of the server's data root, creates a view of
# its orders per customer, waits until its job finished, and checks with
# server-side parameters (the extended protocol), in text and in binary,
# that each customer's row equals EXPECTED (a JSON list of [customer_id,
# orders, smallest, largest], a batch query's result), that a missing key
# is no row, and that a stream queried as a view is psycopg's
# UndefinedTable. Prints "psycopg: ok" and the rows checked.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/python-env.sh
python_env "psycopg==3.3.9" >&2
exec "$VENV/bin/python" - "$@" <<'PY'
import json, sys, time
import psycopg

host, port, expected_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
expected = [tuple(row) for row in json.load(open(expected_path))]
with psycopg.connect(host=host, port=port, user="eddy", dbname="eddy", autocommit=True) as conn:
    conn.execute(
        "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR) "
        "WITH (connector = 'file', path = 'orders.ndjson')"
    )
    conn.execute(
        "CREATE MATERIALIZED VIEW per_customer AS SELECT customer_id, count(*) AS orders, "
        "min(order_amount) AS smallest, max(order_amount) AS largest FROM orders GROUP BY customer_id"
    )
    deadline = time.time() + 60
    while True:
        states = conn.execute("SELECT state FROM eddy.jobs WHERE name = %s", ["view per_customer"]).fetchall()
        if states == [("finished",)]:
            break
        assert time.time() < deadline, f"the view's job: {states}"
        time.sleep(0.1)
    checked = 0
    for binary in (False, True):
        with conn.cursor(binary=binary) as cur:
            for customer, orders, smallest, largest in expected:
                cur.execute(
                    "SELECT orders, smallest, largest FROM per_customer WHERE customer_id = %s", [customer]
                )
                assert cur.fetchall() == [(orders, smallest, largest)], (customer, binary)
                checked += 1
            cur.execute("SELECT count(*) FROM per_customer WHERE customer_id = %s", ["nobody"])
            assert cur.fetchone() == (0,)
    everything = conn.execute("SELECT customer_id, orders, smallest, largest FROM per_customer ORDER BY customer_id").fetchall()
    assert everything == expected, "the whole view"
    try:
        conn.execute("SELECT * FROM orders")
        raise AssertionError("a stream answered as a view")
    except psycopg.errors.UndefinedTable as e:
        assert "CREATE MATERIALIZED VIEW" in (e.diag.message_hint or ""), e.diag.message_hint
print(f"psycopg: ok, {checked} rows checked by key")
PY
