-- fail: fail_cumulate.sql:12:42: CUMULATE windows are not supported yet (TUMBLE and HOP are)
-- A window eddy does not run yet is named where it is written.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

SELECT window_start, COUNT(*) FROM TABLE(CUMULATE(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
GROUP BY window_start, window_end;
