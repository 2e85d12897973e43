-- fail: fail_join.sql:12:32: this LEFT JOIN of two streams needs a time bound
-- A time bound with one end only (an outer join with no time condition at all
-- is an updating join; see tests/changelog.rs).
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');
SELECT a.user_id FROM clicks a LEFT JOIN clicks b ON a.user_id = b.user_id AND b.event_time >= a.event_time;
