-- fail: fail_lead.sql:11:30: lead() OVER is not supported on streams
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');

SELECT user_id, lead(amount) OVER (PARTITION BY user_id ORDER BY event_time) FROM clicks;
