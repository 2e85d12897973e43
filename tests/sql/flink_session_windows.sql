-- Session windows in Flink's three spellings (legacy group window, window
-- table function with and without PARTITION BY) and eddy's own: sessions per
-- key that close after 2 s without a row; SESSION_ROWTIME is end - 1 ms.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

SELECT user_id, SESSION_START(event_time, INTERVAL '2' SECOND) AS s, SESSION_END(event_time, INTERVAL '2' SECOND) AS e,
       SESSION_ROWTIME(event_time, INTERVAL '2' SECOND) AS rt, COUNT(*) AS n
FROM clicks GROUP BY SESSION(event_time, INTERVAL '2' SECOND), user_id;

SELECT window_start, window_end, user_id, COUNT(*) AS n, SUM(amount) AS total
FROM TABLE(SESSION(TABLE clicks PARTITION BY user_id, DESCRIPTOR(event_time), INTERVAL '2' SECOND))
GROUP BY window_start, window_end, user_id;

SELECT window_start, window_end, COUNT(*) AS n
FROM TABLE(SESSION(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '2' SECOND))
GROUP BY window_start, window_end;

SELECT s.start AS window_start, s.end AS window_end, page, biggest
FROM (SELECT session(INTERVAL '2' SECOND) AS s, page, max(amount) AS biggest FROM clicks GROUP BY s, page);
