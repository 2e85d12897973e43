-- RisingWave's EMIT ON WINDOW CLOSE (docs: "Emit on window close"): eddy
-- emits each window's rows once, when the watermark closes it, so the clause
-- is accepted where the query's rows are final, and the output is the same
-- as without it: 5-second clicks per user, from a TUMBLE and a view.
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');

CREATE VIEW per_window AS
SELECT window_start, user_id, count(*) AS n
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '5' SECOND))
GROUP BY window_start, window_end, user_id
EMIT ON WINDOW CLOSE;

SELECT window_start, user_id, n FROM per_window WHERE n >= 2;

SELECT window_start, count(*) AS n
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '5' SECOND))
GROUP BY window_start, window_end
EMIT ON WINDOW CLOSE;
