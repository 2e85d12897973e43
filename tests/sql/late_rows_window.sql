-- Late rows are a stream: a window over late_rows() groups them by their
-- own event time, and filters and unions apply as anywhere.
CREATE TABLE clicks (
  user_id VARCHAR, page VARCHAR, amount DOUBLE, ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

SELECT w.start AS window_start, late, worst_lag_ms FROM (
  SELECT tumble(INTERVAL '5' SECOND) AS w, count(*) AS late, max(lag_ms) AS worst_lag_ms
  FROM late_rows(clicks) WHERE amount > 0 GROUP BY w
);
