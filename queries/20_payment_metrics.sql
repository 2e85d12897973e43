-- Seed stage 2a: enriched payments roll up per tumbling window of the
-- payment's event time into joined count, unmatched payments, amount
-- mismatches and total revenue (paid amounts of matched payments).

CREATE TABLE payment_metrics (
  record_type        VARCHAR,
  window_start_ms    BIGINT,
  window_end_ms      BIGINT,
  joined_count       BIGINT,
  unmatched_payments BIGINT,
  amount_mismatches  BIGINT,
  total_revenue      DOUBLE
) WITH (connector = 'stdout', tag = 'METRICS');

INSERT INTO payment_metrics
SELECT 'window_metrics', CAST(w.start AS BIGINT), CAST(w.end AS BIGINT),
       joined_count, unmatched_payments, amount_mismatches, round(total_revenue, 2)
FROM (
  SELECT tumble(INTERVAL '${METRICS_WINDOW_SECONDS:10}' SECOND) AS w,
         count(*) FILTER (WHERE NOT unmatched) AS joined_count,
         count(*) FILTER (WHERE unmatched) AS unmatched_payments,
         count(*) FILTER (WHERE amount_mismatch) AS amount_mismatches,
         coalesce(sum(paid_amount) FILTER (WHERE NOT unmatched), 0.0) AS total_revenue
  FROM enriched
  GROUP BY w
);
