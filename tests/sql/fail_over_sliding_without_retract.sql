-- fail: fail_over_sliding_without_retract.sql:12:38: welford_mean: this aggregate cannot take rows back out, so it cannot run over a sliding frame
-- An aggregate that cannot take rows back out is refused over a sliding frame, with what to use instead.
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');

SELECT user_id, welford_mean(amount) OVER (PARTITION BY user_id ORDER BY event_time ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) FROM clicks;
