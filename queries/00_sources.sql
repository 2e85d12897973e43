-- The three input streams of the reference pipeline (seed: ORDERS, PAYMENTS,
-- DEVICE EVENTS). By default they come from eddy's built-in deterministic
-- generator; bind any of them to an NDJSON file with --input TABLE=PATH.
--
-- Watermarks: max event time seen - ALLOWED_LATENESS_SECONDS (orders,
-- payments) or OUT_OF_ORDER_BOUND_MS (devices). Orders and payments keep
-- late rows (the default, as plain Flink windows and joins do: each
-- operator leaves a late row out only where its state is final). Device
-- events go through the seed's late-event router: they tolerate
-- DEVICE_ALLOWED_LATENESS_MS more, and a row behind that is diverted to
-- late_rows(devices) and to no query.

CREATE TABLE orders (
  order_id     VARCHAR NOT NULL,
  customer_id  VARCHAR,
  order_amount DOUBLE,
  order_ts     BIGINT NOT NULL,
  country      VARCHAR,
  event_time   TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '${ALLOWED_LATENESS_SECONDS:2}' SECOND
) WITH (connector = 'generator', stream = 'orders', seed = '${SEED:7}', rate = '${RATE:2}');

CREATE TABLE payments (
  payment_id  VARCHAR NOT NULL,
  order_id    VARCHAR,
  paid_amount DOUBLE,
  payment_ts  BIGINT NOT NULL,
  method      VARCHAR,
  event_time  TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '${ALLOWED_LATENESS_SECONDS:2}' SECOND
) WITH (connector = 'generator', stream = 'payments', seed = '${SEED:7}', rate = '${RATE:2}');

CREATE TABLE devices (
  device_id  VARCHAR NOT NULL,
  site_id    VARCHAR,
  event_type VARCHAR,
  status     VARCHAR,
  event_ts   BIGINT NOT NULL,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(event_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '${OUT_OF_ORDER_BOUND_MS:2000}' MILLISECOND
) WITH (
  connector = 'generator', stream = 'devices', seed = '${SEED:7}', rate = '${RATE:2}',
  allowed_lateness = '${DEVICE_ALLOWED_LATENESS_MS:2000}ms',
  late_rows = 'divert'
);
