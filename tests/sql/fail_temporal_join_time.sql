-- fail: fail_temporal_join_time.sql:13:40: FOR SYSTEM_TIME AS OF names 'ts', but the probe side's event time is 'event_time'
-- A temporal join meets the version valid at the probe row's event time.
CREATE TABLE clicks (
  user_id VARCHAR, page VARCHAR, amount DOUBLE, ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');
CREATE TABLE signups (
  user_id VARCHAR, plan VARCHAR, ts BIGINT,
  signup_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR signup_time AS signup_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/signups.ndjson');
SELECT c.user_id, s.plan FROM clicks c JOIN signups FOR SYSTEM_TIME AS OF c.ts AS s ON c.user_id = s.user_id;
