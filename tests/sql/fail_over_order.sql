-- fail: fail_over_order.sql:11:26: OVER on a stream must be ORDER BY event_time
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');

SELECT user_id, count(*) OVER (PARTITION BY user_id ORDER BY amount) FROM clicks;
