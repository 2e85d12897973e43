-- fail: fail_over_frame.sql:11:29: sum: on streams a frame ends at the current row (or 1 PRECEDING): ROWS or RANGE BETWEEN UNBOUNDED PRECEDING, ROWS BETWEEN n PRECEDING or RANGE BETWEEN INTERVAL ... PRECEDING AND CURRENT ROW
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');

SELECT user_id, sum(amount) OVER (PARTITION BY user_id ORDER BY event_time ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM clicks;
