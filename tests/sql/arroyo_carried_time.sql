-- Event time carried to a window through projections that leave it out,
-- as Arroyo carries its hidden timestamp: a window over a window aggregate
-- that does not select its window, and over a union of views that drop it.
CREATE TABLE clicks (
  user_id VARCHAR, page VARCHAR, amount DOUBLE, ts BIGINT,
  event_time TIMESTAMP(3) GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

CREATE VIEW homes AS SELECT user_id FROM clicks WHERE page = 'home';
CREATE VIEW carts AS SELECT user_id FROM clicks WHERE page = 'cart';

SELECT w.start AS window_start, busy_users FROM (
  SELECT tumble(INTERVAL '20' SECOND) AS w, count(*) AS busy_users
  FROM (SELECT user_id, count(*) AS clicks FROM clicks GROUP BY 1, tumble(INTERVAL '5' SECOND))
  WHERE clicks > 1
  GROUP BY 1);

SELECT w.start AS window_start, user_id, n FROM (
  SELECT tumble(INTERVAL '10' SECOND) AS w, user_id, count(*) AS n
  FROM (SELECT user_id FROM homes UNION ALL SELECT user_id FROM carts)
  GROUP BY 1, 2);
