-- The updating GROUP BY of bench/flink.sh: a count and sum per customer over
-- every order (no window: each batch revises the customers it touched, one
-- -U/+U pair per customer and batch), into a blackhole.
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR
) WITH (connector = 'file', path = '${INPUT}');

CREATE TABLE out (customer_id VARCHAR, n BIGINT, total DOUBLE) WITH (connector = 'blackhole');

INSERT INTO out
SELECT customer_id, count(*), sum(order_amount) FROM orders GROUP BY customer_id;
