-- Seed stage 2b: device events roll up per site over a sliding window into
-- event count, fault count, reboot count, firmware failures and fault rate.
-- Only on-time device events count; late ones never enter a window.

CREATE TABLE device_metrics (
  record_type       VARCHAR,
  site_id           VARCHAR,
  window_start      TIMESTAMP,
  window_end        TIMESTAMP,
  event_count       BIGINT,
  fault_count       BIGINT,
  reboot_count      BIGINT,
  firmware_failures BIGINT,
  fault_rate        DOUBLE
) WITH (connector = 'stdout', tag = 'DEVICE_METRICS');

INSERT INTO device_metrics
SELECT 'device_metrics', site_id, w.start, w.end,
       event_count, fault_count, reboot_count, firmware_failures,
       round(CAST(fault_count AS DOUBLE) / event_count, 4)
FROM (
  SELECT hop(INTERVAL '${DEVICE_WINDOW_SLIDE_SECONDS:1}' SECOND,
             INTERVAL '${DEVICE_WINDOW_SIZE_SECONDS:5}' SECOND) AS w,
         site_id,
         count(*) AS event_count,
         count(*) FILTER (WHERE event_type = 'fault') AS fault_count,
         count(*) FILTER (WHERE event_type = 'reboot') AS reboot_count,
         count(*) FILTER (WHERE event_type = 'firmware_update' AND status = 'failed') AS firmware_failures
  FROM devices
  GROUP BY w, site_id
);
