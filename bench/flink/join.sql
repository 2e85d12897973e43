-- Interval join: each payment with its order within 10 s either way, a
-- payment without one NULL-padded (LEFT JOIN), and whether the amounts
-- differ.
CREATE TABLE join_out (payment_id STRING, customer_id STRING, mismatch BOOLEAN)
WITH ('connector' = 'blackhole');

INSERT INTO join_out
SELECT p.payment_id, o.customer_id, ABS(p.paid_amount - o.order_amount) > 0.01
FROM payments p LEFT JOIN orders o
  ON p.order_id = o.order_id
 AND o.ts BETWEEN p.ts - INTERVAL '10' SECOND AND p.ts + INTERVAL '10' SECOND;
