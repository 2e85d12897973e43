-- Reprocessing history, then going on live, in one query: payments before
-- SWITCH_MS (ms since the epoch) come from the Delta table that
-- payments_to_lake.sql wrote, those from SWITCH_MS on from the live Kafka
-- topic (load it with examples/kafka/load_topics.sql). Each payment is
-- counted once, whichever side it comes from:
--
--   eddy run examples/delta/backfill_then_live.sql --set LAKE=lake \
--     --set KAFKA=127.0.0.1:9092 --set SWITCH_MS=1700000600000
--
-- The per-minute windows take both inputs' watermarks: while the history
-- is read (a bounded source, as fast as it goes), live windows wait for
-- it; once it ends, the live stream alone drives them. Pin the history to
-- the table as it was with `version = 'N'` or `timestamp = '...'`. The
-- history side's `payment_ts < SWITCH_MS` goes into the Delta source
-- (`eddy explain` shows it): files and row groups wholly from the switch on
-- are skipped by their statistics, with no change to which rows are late.
-- (`--input live_payments=FILE` reads the live side from NDJSON instead.)

CREATE TABLE history_payments (
  payment_id VARCHAR NOT NULL, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT NOT NULL, method VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'delta', path = '${LAKE:lake}/payments');

CREATE TABLE live_payments (
  payment_id VARCHAR NOT NULL, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT NOT NULL, method VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'kafka', bootstrap_servers = '${KAFKA:127.0.0.1:9092}', topic = 'payments',
        group_id = 'eddy-backfill', start = 'earliest');

CREATE VIEW all_payments AS
  SELECT payment_id, paid_amount, method, event_time FROM history_payments WHERE payment_ts < ${SWITCH_MS}
  UNION ALL
  SELECT payment_id, paid_amount, method, event_time FROM live_payments WHERE payment_ts >= ${SWITCH_MS};

CREATE TABLE per_method_minute (window_start TIMESTAMP, method VARCHAR, payments BIGINT, revenue DOUBLE)
  WITH (connector = 'stdout');

INSERT INTO per_method_minute
SELECT w.start, method, payments, revenue FROM (
  SELECT tumble(INTERVAL '1' MINUTE) AS w, method, count(*) AS payments, round(sum(paid_amount), 2) AS revenue
  FROM all_payments GROUP BY w, method);
