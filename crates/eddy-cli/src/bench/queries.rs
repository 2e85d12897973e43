//! The benchmark queries: each as eddy runs it (streaming SQL over NDJSON
//! files, results into the sink `${SINK}` names) and as the DataFusion
//! batch baseline runs it over the same files.
//!
//! Both forms of a query produce the same columns under the same names, so
//! their outputs can be written the same way and compared by value
//! ([`super::compare`]).

/// The generated orders stream as a table read from `$path`.
macro_rules! orders_table {
    ($path:literal) => {
        concat!(
            "
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '",
            $path,
            "');"
        )
    };
}

/// A count/sum per customer over `$window` of the orders in `${INPUT}`.
macro_rules! window_sql {
    ($window:literal) => {
        concat!(
            orders_table!("${INPUT}"),
            "
CREATE TABLE out (window_start TIMESTAMP, customer_id VARCHAR, n BIGINT, total DOUBLE) WITH (${SINK});
INSERT INTO out
SELECT w.start, customer_id, n, total FROM (
  SELECT ",
            $window,
            " AS w, customer_id, count(*) AS n, sum(order_amount) AS total
  FROM orders GROUP BY w, customer_id
);
"
        )
    };
}

/// The tumbling-window query on the streaming engine.
pub const WINDOW_SQL: &str = window_sql!("tumble(INTERVAL '10' SECOND)");

/// The same aggregation as a DataFusion batch query.
pub const WINDOW_BATCH_SQL: &str = "
SELECT date_bin(INTERVAL '10 seconds', to_timestamp_millis(order_ts)) AS window_start, customer_id,
       count(*) AS n, sum(order_amount) AS total
FROM orders GROUP BY 1, 2";

/// The hopping-window query: 5 s windows every second (each row in 5).
pub const HOP_SQL: &str = window_sql!("hop(INTERVAL '1' SECOND, INTERVAL '5' SECOND)");

/// The same hopping aggregation as a DataFusion batch query, in its
/// fastest form measured: each row's five window starts unnested, then one
/// aggregation. (Slices first, a count/sum per customer and second, each
/// slice then unnested into its five windows, does the same work twice on
/// this data: the generator's 2,000 customers order about once every two
/// seconds each, so a slice holds about one row.)
pub const HOP_BATCH_SQL: &str = "
SELECT window_start, customer_id, count(*) AS n, sum(order_amount) AS total
FROM (
  SELECT unnest(make_array(d, d - INTERVAL '1 second', d - INTERVAL '2 seconds',
                           d - INTERVAL '3 seconds', d - INTERVAL '4 seconds')) AS window_start,
         customer_id, order_amount
  FROM (SELECT date_bin(INTERVAL '1 second', to_timestamp_millis(order_ts)) AS d, customer_id, order_amount
        FROM orders))
GROUP BY 1, 2";

/// The hop as slices: a count/sum per customer and second, each slice's
/// sums then added into the five windows it belongs to.
pub const HOP_SLICES_BATCH_SQL: &str = "
SELECT window_start, customer_id, sum(n) AS n, sum(total) AS total
FROM (
  SELECT unnest(make_array(d, d - INTERVAL '1 second', d - INTERVAL '2 seconds',
                           d - INTERVAL '3 seconds', d - INTERVAL '4 seconds')) AS window_start,
         customer_id, n, total
  FROM (SELECT date_bin(INTERVAL '1 second', to_timestamp_millis(order_ts)) AS d, customer_id,
               count(*) AS n, sum(order_amount) AS total
        FROM orders GROUP BY 1, 2))
GROUP BY 1, 2";

/// The join query on the streaming engine: the enrichment join.
pub const JOIN_SQL: &str = concat!(
    orders_table!("${ORDERS}"),
    "
CREATE TABLE payments (
  payment_id VARCHAR, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT, method VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${PAYMENTS}');
CREATE TABLE out (payment_id VARCHAR, customer_id VARCHAR, mismatch BOOLEAN) WITH (${SINK});
INSERT INTO out
SELECT p.payment_id, o.customer_id, abs(p.paid_amount - o.order_amount) > 0.01
FROM payments p LEFT JOIN orders o
  ON p.order_id = o.order_id
 AND o.event_time BETWEEN p.event_time - INTERVAL '10' SECOND AND p.event_time + INTERVAL '10' SECOND;
"
);

/// The same join as a DataFusion batch query.
pub const JOIN_BATCH_SQL: &str = "
SELECT p.payment_id, o.customer_id, abs(p.paid_amount - o.order_amount) > 0.01 AS mismatch
FROM payments p LEFT JOIN orders o
  ON p.order_id = o.order_id
 AND to_timestamp_millis(o.order_ts) BETWEEN to_timestamp_millis(p.payment_ts) - INTERVAL '10 seconds'
                                         AND to_timestamp_millis(p.payment_ts) + INTERVAL '10 seconds'";

/// The OVER query's select list, its windows ordered by `$order`.
macro_rules! over_select {
    ($order:literal) => {
        concat!(
            "
SELECT order_id, customer_id, order_ts,
  count(*) OVER (PARTITION BY customer_id ORDER BY ",
            $order,
            "
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS n,
  sum(order_amount) OVER (PARTITION BY customer_id ORDER BY ",
            $order,
            "
                          ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS total,
  dynamic_threshold(order_amount, 3.0, 5000.0, 5) OVER (PARTITION BY customer_id ORDER BY ",
            $order,
            "
                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS threshold,
  order_ts - lag(order_ts) OVER (PARTITION BY customer_id ORDER BY ",
            $order,
            ") AS gap_ms
FROM orders"
        )
    };
}

/// The OVER query: the amount rule's running statistics per customer over
/// its earlier orders (`dynamic_threshold`), a running count and sum, and
/// the time since the customer's previous order, for every order.
pub const OVER_SQL: &str = concat!(
    orders_table!("${INPUT}"),
    "
CREATE TABLE out (
  order_id VARCHAR, customer_id VARCHAR, order_ts BIGINT,
  n BIGINT, total DOUBLE, threshold DOUBLE, gap_ms BIGINT
) WITH (${SINK});
INSERT INTO out",
    over_select!("event_time"),
    ";
"
);

/// The same OVER aggregates as DataFusion batch window functions (with
/// eddy's `dynamic_threshold` registered), ordered by the same time as a
/// number.
pub const OVER_BATCH_SQL: &str = over_select!("order_ts");
