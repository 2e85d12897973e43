-- The reference pipeline's payment rules as row patterns, on the built-in
-- generator (the same rows as `eddy run queries/`):
--
--   eddy run examples/match_recognize/fraud_rules.sql
--
-- Velocity: five or more payments of one customer inside five seconds. The
-- pipeline's hopping window (queries/40_payment_anomalies.sql) looks at
-- 5-second windows aligned to whole seconds; the pattern looks at every
-- 5-second span, so it also finds bursts that straddle two windows, and it
-- reports each burst once (AFTER MATCH SKIP PAST LAST ROW) rather than once
-- per window that holds it.
--
-- Sequence: a small payment (under SMALL_AMOUNT) followed, within a minute,
-- by a large one (over LARGE_FACTOR times it), whatever payments come
-- between (as few as reach the large one: OTHER*? is reluctant): a card
-- tried with a small amount before it is used for a large one. On the
-- generator it finds cust-001's planted 9800.0 payment, 26 s after a
-- 99.66 one.

CREATE TABLE orders (
  order_id     VARCHAR NOT NULL,
  customer_id  VARCHAR,
  order_amount DOUBLE,
  order_ts     BIGINT NOT NULL,
  country      VARCHAR,
  event_time   TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'generator', stream = 'orders', seed = '${SEED:7}');

CREATE TABLE payments (
  payment_id  VARCHAR NOT NULL,
  order_id    VARCHAR,
  paid_amount DOUBLE,
  payment_ts  BIGINT NOT NULL,
  method      VARCHAR,
  event_time  TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'generator', stream = 'payments', seed = '${SEED:7}');

CREATE TABLE fraud_alerts (
  rule          VARCHAR,
  customer_id   VARCHAR,
  payments      BIGINT,
  total_amount  DOUBLE,
  first_payment VARCHAR,
  last_payment  VARCHAR,
  first_at      TIMESTAMP,
  last_at       TIMESTAMP
) WITH (connector = 'stdout', tag = 'FRAUD');

-- Payments with the customer of their order (paid within 10 s of it).
CREATE VIEW customer_payments AS
SELECT o.customer_id, p.payment_id, p.paid_amount, p.event_time
FROM payments p
JOIN orders o
  ON p.order_id = o.order_id
 AND o.event_time BETWEEN p.event_time - INTERVAL '10' SECOND AND p.event_time + INTERVAL '10' SECOND;

INSERT INTO fraud_alerts
SELECT 'velocity', customer_id, payments, round(total_amount, 2), first_payment, last_payment, first_at, last_at
FROM customer_payments
  MATCH_RECOGNIZE (
    PARTITION BY customer_id
    ORDER BY event_time
    MEASURES
      COUNT(*)            AS payments,
      SUM(P.paid_amount)  AS total_amount,
      FIRST(P.payment_id) AS first_payment,
      LAST(P.payment_id)  AS last_payment,
      FIRST(P.event_time) AS first_at,
      LAST(P.event_time)  AS last_at
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (P{5,}) WITHIN INTERVAL '5' SECOND
    DEFINE P AS TRUE
  );

INSERT INTO fraud_alerts
SELECT 'small_then_large', customer_id, payments, round(total_amount, 2), first_payment, last_payment, first_at, last_at
FROM customer_payments
  MATCH_RECOGNIZE (
    PARTITION BY customer_id
    ORDER BY event_time
    MEASURES
      COUNT(*)                AS payments,
      SUM(paid_amount)        AS total_amount,
      SMALL.payment_id        AS first_payment,
      LARGE.payment_id        AS last_payment,
      SMALL.event_time        AS first_at,
      LARGE.event_time        AS last_at
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (SMALL OTHER*? LARGE) WITHIN INTERVAL '1' MINUTE
    DEFINE
      SMALL AS SMALL.paid_amount < ${SMALL_AMOUNT:150.0},
      LARGE AS LARGE.paid_amount > ${LARGE_FACTOR:10} * SMALL.paid_amount
  );
