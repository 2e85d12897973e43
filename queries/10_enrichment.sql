-- Seed stage 1: payments joined with their orders by order_id within
-- JOIN_WINDOW_SECONDS of event time. Every payment comes out once: with its
-- order's context, or - when no order arrived within the window - flagged
-- unmatched once the watermark has passed the window.

CREATE TABLE enriched_payments (
  record_type     VARCHAR,
  payment_id      VARCHAR,
  order_id        VARCHAR,
  paid_amount     DOUBLE,
  method          VARCHAR,
  payment_ts_ms   BIGINT,
  unmatched       BOOLEAN,
  customer_id     VARCHAR,
  order_amount    DOUBLE,
  country         VARCHAR,
  amount_mismatch BOOLEAN
) WITH (connector = 'stdout', tag = 'ENRICHED');

CREATE VIEW enriched AS
SELECT p.payment_id,
       p.order_id,
       p.paid_amount,
       p.method,
       p.payment_ts AS payment_ts_ms,
       o.order_id IS NULL AS unmatched,
       o.customer_id,
       o.order_amount,
       o.country,
       coalesce(abs(p.paid_amount - o.order_amount) > ${AMOUNT_MATCH_TOLERANCE:0.01}, false) AS amount_mismatch,
       p.event_time
FROM payments p
LEFT JOIN orders o
  ON p.order_id = o.order_id
 AND o.event_time BETWEEN p.event_time - INTERVAL '${JOIN_WINDOW_SECONDS:10}' SECOND
                      AND p.event_time + INTERVAL '${JOIN_WINDOW_SECONDS:10}' SECOND;

INSERT INTO enriched_payments
SELECT 'enriched_payment', payment_id, order_id, paid_amount, method, payment_ts_ms,
       unmatched, customer_id, order_amount, country, amount_mismatch
FROM enriched;
