-- An updating join: payments LEFT JOIN orders without a time bound (a
-- payment before its order is NULL-padded, then revised when it comes).
CREATE TABLE join_out (payment_id STRING, customer_id STRING, mismatch BOOLEAN)
WITH ('connector' = 'blackhole');

INSERT INTO join_out
SELECT p.payment_id, o.customer_id, ABS(p.paid_amount - o.order_amount) > 0.01
FROM payments p LEFT JOIN orders o ON p.order_id = o.order_id;
