-- Time flows through windows: a window's results carry event time
-- (window_time = end - 1 ms, or window_end) and a watermark, so a second
-- window (cascading), a ranking per window (Top-N), a window join and an
-- OVER can follow them.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

CREATE VIEW per_user_5s AS
SELECT window_start, window_end, window_time AS rowtime, user_id, SUM(amount) AS partial, COUNT(*) AS n
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '5' SECOND))
GROUP BY window_start, window_end, window_time, user_id;

-- Cascading: 20 s windows over the 5 s results.
SELECT window_start, window_end, SUM(partial) AS total, SUM(n) AS n
FROM TABLE(TUMBLE(TABLE per_user_5s, DESCRIPTOR(rowtime), INTERVAL '20' SECOND))
GROUP BY window_start, window_end;

-- Window Top-N: the two users with the most spent per 10 s.
SELECT * FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY total DESC) AS rownum
  FROM (
    SELECT window_start, window_end, user_id, SUM(amount) AS total
    FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
    GROUP BY window_start, window_end, user_id
  )
) WHERE rownum <= 2;

-- Window join of two window aggregates (FULL: windows where one side is empty too).
SELECT COALESCE(h.window_start, c.window_start) AS window_start, COALESCE(h.user_id, c.user_id) AS user_id,
       h.n AS home_clicks, c.n AS cart_clicks
FROM (SELECT window_start, window_end, user_id, COUNT(*) AS n
      FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
      WHERE page = 'home' GROUP BY window_start, window_end, user_id) h
FULL JOIN (SELECT window_start, window_end, user_id, COUNT(*) AS n
      FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
      WHERE page = 'cart' GROUP BY window_start, window_end, user_id) c
ON h.window_start = c.window_start AND h.window_end = c.window_end AND h.user_id = c.user_id;

-- Window join of window table functions' rows (no aggregation): each user's
-- small and big clicks in the same 10 s window.
SELECT s.user_id, s.amount AS small, b.amount AS big, s.window_start
FROM (SELECT * FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '10' SECOND)) WHERE amount < 20) s
JOIN (SELECT * FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '10' SECOND)) WHERE amount > 45) b
ON s.user_id = b.user_id AND s.window_start = b.window_start AND s.window_end = b.window_end;

-- OVER over window results: a running total of each user's 5 s sums.
SELECT user_id, window_start, partial, SUM(partial) OVER (PARTITION BY user_id ORDER BY rowtime) AS running
FROM per_user_5s;
