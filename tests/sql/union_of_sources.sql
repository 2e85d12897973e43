-- Two sources with their own watermarks feed one window: it closes on the
-- minimum of both watermarks.
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

SELECT w.start AS window_start, kind, n FROM (
  SELECT tumble(INTERVAL '10' SECOND) AS w, kind, count(*) AS n FROM (
    SELECT 'click' AS kind, event_time FROM clicks
    UNION ALL
    SELECT 'signup' AS kind, event_time FROM signups
  ) GROUP BY w, kind
);
