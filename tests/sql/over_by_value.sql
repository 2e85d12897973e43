-- OVER ordered by a value, not event time (Flink's OVER ORDER BY a column,
-- RisingWave's OVER over a table): each click with how many of its user's
-- clicks are cheaper or as cheap, and the next dearer amount. A click
-- changes the rows above it, so the output is a changelog (-U/+U).
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');

SELECT user_id, amount,
       count(*) OVER (PARTITION BY user_id ORDER BY amount) AS as_cheap,
       lead(amount) OVER (PARTITION BY user_id ORDER BY amount) AS next_dearer
FROM clicks
WHERE user_id = 'u3' AND ts < 1700000012000;
