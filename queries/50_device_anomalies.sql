-- Seed stage 3, devices: on-time device events.
--
-- Fault spike: more than MAX_FAULTS_PER_WINDOW faults at one site inside a
-- DEVICE_WINDOW_SIZE_SECONDS window sliding by DEVICE_WINDOW_SLIDE_SECONDS.
-- Reboot loop: more than MAX_REBOOTS_PER_WINDOW reboots of one device in
-- such a window.
-- Firmware-update failure: every failed update, with the device's running
-- failure count (keyed state), as soon as the watermark orders it.

CREATE TABLE device_anomalies (
  record_type   VARCHAR,
  anomaly_type  VARCHAR,
  device_id     VARCHAR,
  site_id       VARCHAR,
  fault_count   BIGINT,
  reboot_count  BIGINT,
  failure_count BIGINT,
  threshold     BIGINT,
  window_start  TIMESTAMP,
  window_end    TIMESTAMP,
  event_time    TIMESTAMP
) WITH (connector = 'stdout', tag = 'DEVICE_ANOMALY', omit_nulls = 'true');

INSERT INTO device_anomalies (record_type, anomaly_type, site_id, fault_count, threshold, window_start, window_end)
SELECT 'anomaly', 'device_fault_spike', site_id, fault_count, ${MAX_FAULTS_PER_WINDOW:3}, w.start, w.end
FROM (
  SELECT hop(INTERVAL '${DEVICE_WINDOW_SLIDE_SECONDS:1}' SECOND, INTERVAL '${DEVICE_WINDOW_SIZE_SECONDS:5}' SECOND) AS w,
         site_id, count(*) AS fault_count
  FROM devices WHERE event_type = 'fault'
  GROUP BY w, site_id
  HAVING count(*) > ${MAX_FAULTS_PER_WINDOW:3}
);

INSERT INTO device_anomalies (record_type, anomaly_type, device_id, reboot_count, threshold, window_start, window_end)
SELECT 'anomaly', 'device_reboot_loop', device_id, reboot_count, ${MAX_REBOOTS_PER_WINDOW:3}, w.start, w.end
FROM (
  SELECT hop(INTERVAL '${DEVICE_WINDOW_SLIDE_SECONDS:1}' SECOND, INTERVAL '${DEVICE_WINDOW_SIZE_SECONDS:5}' SECOND) AS w,
         device_id, count(*) AS reboot_count
  FROM devices WHERE event_type = 'reboot'
  GROUP BY w, device_id
  HAVING count(*) > ${MAX_REBOOTS_PER_WINDOW:3}
);

INSERT INTO device_anomalies (record_type, anomaly_type, device_id, site_id, failure_count, event_time)
SELECT 'anomaly', 'firmware_update_failure', device_id, site_id, failure_count, event_time
FROM (
  SELECT device_id, site_id, event_time,
         count(*) OVER (PARTITION BY device_id ORDER BY event_time
                        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS failure_count
  FROM devices
  WHERE event_type = 'firmware_update' AND status = 'failed'
);
