-- fail: fail_session.sql:12:17: SESSION windows are not supported yet (TUMBLE and HOP are)
-- A window eddy does not run yet is named where it is written.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

SELECT user_id, SESSION_START(event_time, INTERVAL '2' SECOND) AS s, COUNT(*) AS n
FROM clicks GROUP BY SESSION(event_time, INTERVAL '2' SECOND), user_id;
