-- Each payment with its order within 10 s either way (an inner interval
-- join: a pair is printed as soon as its second row arrives), with both
-- event times, from which its latency is measured.
CREATE TABLE join_out (payment_id STRING, order_id STRING, order_ts BIGINT, payment_ts BIGINT)
WITH ('connector' = 'print');

INSERT INTO join_out
SELECT p.payment_id, o.order_id, o.order_ts, p.payment_ts
FROM payments p JOIN orders o
  ON p.order_id = o.order_id
 AND o.ts BETWEEN p.ts - INTERVAL '10' SECOND AND p.ts + INTERVAL '10' SECOND;
