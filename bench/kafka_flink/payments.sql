-- The payments of `eddy generate --stream payments` in a Kafka topic, as
-- orders.sql declares the orders.
CREATE TABLE payments (
  payment_id STRING, order_id STRING, paid_amount DOUBLE, payment_ts BIGINT, `method` STRING,
  ts AS TO_TIMESTAMP_LTZ(payment_ts, 3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = '${PAYMENTS_TOPIC}',
  'properties.bootstrap.servers' = '${BOOTSTRAP}',
  'properties.group.id' = '${GROUP}',
  'scan.startup.mode' = 'earliest-offset',
  'properties.fetch.max.wait.ms' = '${FETCH_WAIT_MS}',
  'format' = 'json'
);
