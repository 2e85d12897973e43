-- fail: fail_topn_without_window.sql:12:53: a ranking on a stream that is not ORDER BY event_time (Top-N) ranks the results of a window: PARTITION BY window_start, window_end (or the window) of a window aggregate; over the whole stream it would never be final
-- Top-N over the raw stream is refused with what to do instead.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

SELECT * FROM (SELECT user_id, amount, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY amount DESC) AS rn FROM clicks) WHERE rn <= 3;
