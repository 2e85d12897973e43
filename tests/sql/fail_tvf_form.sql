-- fail: fail_tvf_form.sql:12:47: window table functions of this form are not supported: write HOP(TABLE t, DESCRIPTOR(time column), slide, size [, offset])
-- A window table function with a size missing is named at the function, with its form.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

SELECT window_start, COUNT(*) AS n FROM TABLE(HOP(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '5' SECOND)) GROUP BY window_start, window_end;
