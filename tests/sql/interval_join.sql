-- Each click joined with the same user's signups in the second before it;
-- clicks without one come out once, null-padded, when their interval has passed.
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');

CREATE TABLE signups (
  user_id VARCHAR, ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/signups.ndjson');

SELECT c.user_id, c.ts AS click_ts, s.ts AS signup_ts, c.ts - s.ts AS gap_ms
FROM clicks c
LEFT JOIN signups s
  ON c.user_id = s.user_id
 AND s.event_time >= c.event_time - INTERVAL '1' SECOND
 AND s.event_time <= c.event_time;
