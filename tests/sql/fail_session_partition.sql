-- fail: fail_session_partition.sql:12:56: SESSION(... PARTITION BY page ...): sessions are kept per GROUP BY key; add page to the GROUP BY
-- Sessions are per GROUP BY key: a PARTITION BY column must be grouped by.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

SELECT window_start, user_id, COUNT(*) AS n FROM TABLE(SESSION(TABLE clicks PARTITION BY page, DESCRIPTOR(event_time), INTERVAL '2' SECOND))
GROUP BY window_start, window_end, user_id;
