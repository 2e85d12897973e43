#!/usr/bin/env bash
# node-postgres (the `pg` package, Node.js's PostgreSQL driver) against
# `eddy serve --pg-addr --token TOKEN`: the checks of tests/pg_wire.rs's
# node-postgres test. The driver is installed from npm exactly as
# scripts/node-pg/package-lock.json pins it (npm ci) into a cache directory
# outside the clone (EDDY_NODE_PG_DIR, default ~/.cache/eddy-node-pg).
#
#   scripts/pg-client.node.sh HOST PORT TOKEN EXPECTED.json
#
# Checks that a wrong password is refused (28P01); declares the orders file
# of the server's data root and a view of its orders per customer; waits
# for the view's job to finish; reads each customer's row with a named
# prepared statement ($1, the extended protocol) and compares it with
# EXPECTED (a JSON list of [customer_id, orders, smallest, largest], a batch
# query's result); checks that a stream queried as a view is 42P01. Prints
# "node-postgres: ok" and the rows checked.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${EDDY_NODE_PG_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eddy-node-pg}
mkdir -p "$DIR"
exec 9>"$DIR.lock"
flock 9
if ! cmp -s scripts/node-pg/package-lock.json "$DIR/package-lock.json" || [ ! -d "$DIR/node_modules/pg" ]; then
  echo "installing node-postgres as scripts/node-pg/package-lock.json pins it into $DIR" >&2
  cp scripts/node-pg/package.json scripts/node-pg/package-lock.json "$DIR/"
  (cd "$DIR" && npm ci --silent --no-audit --no-fund >/dev/null)
fi
flock -u 9
NODE_PATH="$DIR/node_modules" exec node - "$@" <<'JS'
const assert = require("assert");
const { Client } = require("pg");
const fs = require("fs");

const [host, port, token, expectedPath] = process.argv.slice(2);
const expected = JSON.parse(fs.readFileSync(expectedPath, "utf8"));
const connect = async (password) => {
  const client = new Client({ host, port: Number(port), user: "eddy", database: "eddy", password });
  await client.connect();
  return client;
};

(async () => {
  await assert.rejects(connect("not the token"), (e) => e.code === "28P01");
  const client = await connect(token);
  await client.query(
    "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR) " +
      "WITH (connector = 'file', path = 'orders.ndjson')"
  );
  await client.query(
    "CREATE MATERIALIZED VIEW per_customer AS SELECT customer_id, count(*) AS orders, " +
      "min(order_amount) AS smallest, max(order_amount) AS largest FROM orders GROUP BY customer_id"
  );
  const deadline = Date.now() + 60000;
  for (;;) {
    const { rows } = await client.query("SELECT state FROM eddy.jobs WHERE name = $1", ["view per_customer"]);
    if (rows.length === 1 && rows[0].state === "finished") break;
    assert(Date.now() < deadline, `the view's job: ${JSON.stringify(rows)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  let checked = 0;
  for (const [customer, orders, smallest, largest] of expected) {
    const { rows } = await client.query({
      name: "by_customer",
      text: "SELECT orders, smallest, largest FROM per_customer WHERE customer_id = $1",
      values: [customer],
    });
    // node-postgres gives bigint (int8) as a string, float8 as a number.
    assert.deepStrictEqual(
      rows.map((r) => [Number(r.orders), r.smallest, r.largest]),
      [[orders, smallest, largest]],
      customer
    );
    checked += 1;
  }
  const none = await client.query({ name: "by_customer", text: "SELECT orders, smallest, largest FROM per_customer WHERE customer_id = $1", values: ["nobody"] });
  assert.strictEqual(none.rows.length, 0);
  await assert.rejects(client.query("SELECT * FROM orders"), (e) => e.code === "42P01" && /CREATE MATERIALIZED VIEW/.test(e.hint || ""));
  await client.end();
  console.log(`node-postgres: ok, ${checked} rows checked by key`);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
JS
