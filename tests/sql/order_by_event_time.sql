-- ORDER BY the event time on a stream, as Flink allows: rows come out in
-- event-time order as the watermark passes them (the input is out of order
-- within its 2-second bound); ties by amount, largest first. The late row
-- (99.0) is counted late at the source and never reaches the sort.
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');

SELECT ts, user_id, amount FROM clicks WHERE user_id = 'u1' ORDER BY event_time, amount DESC;
