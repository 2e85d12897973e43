-- fail: fail_session_rows.sql:12:21: SESSION(TABLE clicks, ...) without GROUP BY window_start, window_end is not supported: a row's session depends on the rows after it
-- Reading a SESSION table function's rows without aggregating is refused at the SESSION.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

SELECT * FROM TABLE(SESSION(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '5' SECOND));
