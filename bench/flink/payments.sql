-- The payments of `eddy generate --stream payments`, as orders.sql declares
-- the orders.
CREATE TABLE payments (
  payment_id STRING, order_id STRING, paid_amount DOUBLE, payment_ts BIGINT, `method` STRING,
  ts AS TO_TIMESTAMP_LTZ(payment_ts, 3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${PAYMENTS}', 'format' = 'json');
