-- Orders as both engines make them in process, with no decoding on
-- either side: Flink's `datagen` sequence (1 to ${ROWS}) and every other
-- column computed from it, so each engine has the same rows (eddy's
-- datagen makes Flink's sequences exactly). One order a millisecond of
-- event time, 2,000 customers; the columns and watermark of orders.sql,
-- so the queries run on either unchanged. bench/flink.sh runs this file on
-- eddy and on Apache Flink alike, as it is.
CREATE TABLE orders (
  seq BIGINT,
  order_id AS CONCAT('order-', CAST(seq AS STRING)),
  customer_id AS CONCAT('cust-', CAST(MOD(seq * 7919, 2000) AS STRING)),
  order_amount AS CAST(MOD(seq * 104729, 100000) AS DOUBLE) / 100,
  order_ts AS 1700000000000 + seq,
  country AS CASE MOD(seq, 3) WHEN 0 THEN 'DE' WHEN 1 THEN 'GB' ELSE 'JP' END,
  ts AS TO_TIMESTAMP_LTZ(1700000000000 + seq, 3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (
  'connector' = 'datagen', 'rows-per-second' = '1000000000',
  'fields.seq.kind' = 'sequence', 'fields.seq.start' = '1', 'fields.seq.end' = '${ROWS}'
);
