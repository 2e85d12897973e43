-- RisingWave's LEAD and LAG OVER with EMIT ON WINDOW CLOSE: each click with
-- its user's previous and next amounts. A row goes out once, when the
-- watermark has passed it and its next click (its lead is final then); a
-- user's last click goes out at the end, its lead NULL. Without the clause
-- the output is the same rows (eddy emits OVER rows final either way).
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');

SELECT user_id, ts, amount,
       lag(amount) OVER (PARTITION BY user_id ORDER BY event_time) AS prev_amount,
       lead(amount) OVER (PARTITION BY user_id ORDER BY event_time) AS next_amount,
       lead(ts, 2) OVER (PARTITION BY user_id ORDER BY event_time) - ts AS ms_to_second_next
FROM clicks
WHERE user_id = 'u1'
EMIT ON WINDOW CLOSE;
