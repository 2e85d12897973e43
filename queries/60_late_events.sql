-- Seed stage 4: late device events are never dropped silently. Each one the
-- devices source diverted (event time below watermark - allowed lateness)
-- comes out with the watermark that judged it and its lag.

CREATE TABLE late_events (
  record_type  VARCHAR,
  device_id    VARCHAR,
  site_id      VARCHAR,
  event_type   VARCHAR,
  status       VARCHAR,
  event_ts_ms  BIGINT,
  watermark_ms BIGINT,
  lag_ms       BIGINT
) WITH (connector = 'stdout', tag = 'LATE_EVENT');

INSERT INTO late_events
SELECT 'device_event', device_id, site_id, event_type, status, event_ts, watermark_ms, lag_ms
FROM late_rows(devices);
