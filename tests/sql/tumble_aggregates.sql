-- Tumbling 5 s windows per user with several DataFusion aggregates and HAVING.
-- The late row (amount 99.0) must not appear in any window.
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');

SELECT w.start AS window_start, w.end AS window_end, user_id, n, total, lo, hi, avg_amount, pages
FROM (
  SELECT tumble(INTERVAL '5' SECOND) AS w, user_id,
         count(*) AS n, round(sum(amount), 2) AS total, min(amount) AS lo, max(amount) AS hi,
         round(avg(amount), 4) AS avg_amount, count(DISTINCT page) AS pages
  FROM clicks
  GROUP BY w, user_id
  HAVING count(*) >= 2
);

-- More DataFusion aggregates in a window.
SELECT w.start AS window_start, page, round(sd, 4) AS sd, round(vp, 4) AS vp, med, all_big
FROM (
  SELECT tumble(INTERVAL '10' SECOND) AS w, page, stddev(amount) AS sd, var_pop(amount) AS vp,
         median(amount) AS med, bool_and(amount > 2) AS all_big
  FROM clicks GROUP BY w, page
);
