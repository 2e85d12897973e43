-- Cumulating windows: every 10 s a new start, windows ending every 2 s up
-- to 10 s long (Flink's CUMULATE), and eddy's cumulate(step, max).
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

SELECT window_start, window_end, COUNT(*), SUM(amount) AS total FROM TABLE(CUMULATE(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
GROUP BY window_start, window_end;

SELECT w.start AS window_start, w.end AS window_end, user_id, n
FROM (SELECT cumulate(INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS w, user_id, count(*) AS n FROM clicks GROUP BY w, user_id);
