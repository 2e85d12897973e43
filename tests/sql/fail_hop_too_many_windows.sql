-- fail: fail_hop_too_many_windows.sql:12:8: hop(): windows of 1 day every 1 ms put each row in 86400000 windows (at most 100000); check the units
-- A hop whose slide is a unit typo (a millisecond for a minute) is refused with the cause, not run forever.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

SELECT hop(INTERVAL '1' MILLISECOND, INTERVAL '1' DAY) AS w, count(*) AS n FROM clicks GROUP BY w;
