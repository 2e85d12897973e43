-- The orders of `eddy generate --stream orders` as Flink SQL declares an
-- NDJSON file (or a directory of them): event time from the epoch
-- milliseconds, watermark 2 s behind. bench/flink.sh runs these files on
-- eddy and on Apache Flink alike, as they are.
CREATE TABLE orders (
  order_id STRING, customer_id STRING, order_amount DOUBLE, order_ts BIGINT, country STRING,
  ts AS TO_TIMESTAMP_LTZ(order_ts, 3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${ORDERS}', 'format' = 'json');
