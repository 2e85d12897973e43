-- fail: fail_emit_on_window_close.sql:13:1: EMIT ON WINDOW CLOSE asks for final rows only, but this query's rows change as input arrives (the GROUP BY without a window
-- A GROUP BY without a window updates its rows as clicks arrive: it has no
-- window to close, so the clause is refused rather than ignored.
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');
SELECT user_id, count(*) AS n FROM clicks GROUP BY user_id
EMIT ON WINDOW CLOSE;
