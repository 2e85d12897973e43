-- Hopping windows (width 4 s, slide 2 s) without keys, written with the
-- string form of durations.
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');

SELECT w.start AS window_start, w.end AS window_end, n, total
FROM (
  SELECT hop('2 seconds', '4 seconds') AS w, count(*) AS n, round(sum(amount), 2) AS total
  FROM clicks GROUP BY w
);
