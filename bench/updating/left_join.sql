-- The regular LEFT join of bench/flink.sh: every payment with its order, no
-- time bound (both sides kept; a payment that arrives before its order is
-- emitted NULL-padded, then taken back when the order comes), into a
-- blackhole.
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR
) WITH (connector = 'file', path = '${ORDERS}');

CREATE TABLE payments (
  payment_id VARCHAR, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT, method VARCHAR
) WITH (connector = 'file', path = '${PAYMENTS}');

CREATE TABLE out (payment_id VARCHAR, customer_id VARCHAR, mismatch BOOLEAN) WITH (connector = 'blackhole');

INSERT INTO out
SELECT p.payment_id, o.customer_id, abs(p.paid_amount - o.order_amount) > 0.01
FROM payments p LEFT JOIN orders o ON p.order_id = o.order_id;
