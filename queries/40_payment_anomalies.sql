-- Seed stage 3, payments: matched enriched payments, keyed by customer, on
-- the payment's event time.
--
-- Amount rule: a payment above the customer's dynamic threshold, computed
-- over the customer's earlier matched payments: AMOUNT_STATIC_FLOOR while
-- fewer than MIN_SAMPLES_FOR_DYNAMIC, then mean + AMOUNT_SIGMA_MULTIPLIER x
-- population stddev (Welford, in keyed state). A customer's first payment
-- has no earlier ones (an empty frame is NULL in SQL): the floor applies.
-- Velocity rule: more than MAX_TRANSACTIONS_PER_WINDOW payments of one
-- customer inside a WINDOW_SIZE_SECONDS window sliding by WINDOW_SLIDE_SECONDS.
--
-- Both rules write one table; each record shows only its own fields.

CREATE TABLE payment_anomalies (
  record_type       VARCHAR,
  anomaly_type      VARCHAR,
  customer_id       VARCHAR,
  payment_id        VARCHAR,
  order_id          VARCHAR,
  amount            DOUBLE,
  threshold         DOUBLE,
  transaction_count BIGINT,
  total_amount      DOUBLE,
  window_start      TIMESTAMP,
  window_end        TIMESTAMP,
  event_time        TIMESTAMP
) WITH (connector = 'stdout', tag = 'ANOMALY', omit_nulls = 'true');

CREATE VIEW matched_payments AS
SELECT customer_id, payment_id, order_id, paid_amount, event_time FROM enriched WHERE NOT unmatched;

INSERT INTO payment_anomalies (record_type, anomaly_type, customer_id, payment_id, order_id, amount, threshold, event_time)
SELECT 'anomaly', 'amount', customer_id, payment_id, order_id, paid_amount, round(threshold, 2), event_time
FROM (
  SELECT customer_id, payment_id, order_id, paid_amount, event_time,
         coalesce(
           dynamic_threshold(paid_amount, ${AMOUNT_SIGMA_MULTIPLIER:3.0}, ${AMOUNT_STATIC_FLOOR:5000.0}, ${MIN_SAMPLES_FOR_DYNAMIC:5})
             OVER (PARTITION BY customer_id ORDER BY event_time
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
           ${AMOUNT_STATIC_FLOOR:5000.0}) AS threshold
  FROM matched_payments
)
WHERE paid_amount > threshold;

INSERT INTO payment_anomalies (record_type, anomaly_type, customer_id, transaction_count, total_amount, window_start, window_end)
SELECT 'anomaly', 'velocity', customer_id, transaction_count, round(total_amount, 2), w.start, w.end
FROM (
  SELECT hop(INTERVAL '${WINDOW_SLIDE_SECONDS:1}' SECOND, INTERVAL '${WINDOW_SIZE_SECONDS:5}' SECOND) AS w,
         customer_id, count(*) AS transaction_count, sum(paid_amount) AS total_amount
  FROM matched_payments
  GROUP BY w, customer_id
  HAVING count(*) > ${MAX_TRANSACTIONS_PER_WINDOW:4}
);
