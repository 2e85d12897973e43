-- The orders of `eddy generate --stream orders` in a Kafka topic, as Flink
-- SQL declares them: JSON records read from the topic's start and
-- followed, event time from the epoch milliseconds, watermark 2 s behind
-- (the generator's rows are at most 1.5 s out of order, so none is late
-- and both engines see every row). A fetch waits at most FETCH_WAIT_MS
-- for records (the broker under test answers an empty fetch only then,
-- not when records arrive). bench/kafka_flink.sh runs these files
-- on eddy and on Apache Flink alike, as they are.
CREATE TABLE orders (
  order_id STRING, customer_id STRING, order_amount DOUBLE, order_ts BIGINT, country STRING,
  ts AS TO_TIMESTAMP_LTZ(order_ts, 3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = '${ORDERS_TOPIC}',
  'properties.bootstrap.servers' = '${BOOTSTRAP}',
  'properties.group.id' = '${GROUP}',
  'scan.startup.mode' = 'earliest-offset',
  'properties.fetch.max.wait.ms' = '${FETCH_WAIT_MS}',
  'format' = 'json'
);
