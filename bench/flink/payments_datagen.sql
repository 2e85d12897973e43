-- Payments made in process as orders_datagen.sql makes the orders: payment
-- `seq` pays order `seq` half a second after it, every tenth names no
-- order (NULL-padded by the LEFT JOINs) and every seventh pays 1.00 more
-- than the order's amount (a mismatch).
CREATE TABLE payments (
  seq BIGINT,
  payment_id AS CONCAT('pay-', CAST(seq AS STRING)),
  order_id AS CONCAT(CASE WHEN MOD(seq, 10) = 0 THEN 'none-' ELSE 'order-' END, CAST(seq AS STRING)),
  paid_amount AS CAST(MOD(seq * 104729, 100000) AS DOUBLE) / 100 + CASE WHEN MOD(seq, 7) = 0 THEN 1 ELSE 0 END,
  payment_ts AS 1700000000500 + seq,
  `method` AS CASE MOD(seq, 2) WHEN 0 THEN 'card' ELSE 'bank_transfer' END,
  ts AS TO_TIMESTAMP_LTZ(1700000000500 + seq, 3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (
  'connector' = 'datagen', 'rows-per-second' = '1000000000',
  'fields.seq.kind' = 'sequence', 'fields.seq.start' = '1', 'fields.seq.end' = '${ROWS}'
);
