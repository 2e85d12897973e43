-- fail: fail_group_without_window.sql:11:38: GROUP BY on a stream needs a window
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');

SELECT user_id, count(*) FROM clicks GROUP BY user_id;
