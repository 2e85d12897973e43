-- fail: fail_ntile.sql:11:26: ntile() OVER is not supported on streams (supported: running aggregates, row_number, lag, lead)
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');

SELECT user_id, ntile(4) OVER (PARTITION BY user_id ORDER BY event_time) FROM clicks;
