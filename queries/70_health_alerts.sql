-- Seed stage 5: the pipeline watches itself.
--
-- throughput_below_floor: a gap of more than MAX_EVENT_GAP_MS between
--   consecutive events of all three streams, in event-time order.
-- late_event_spike: more than MAX_LATE_EVENTS_PER_WINDOW late events per
--   HEALTH_WINDOW_SECONDS tumbling window (by the late events' own time).
-- watermark_lag_exceeded: a late event more than MAX_WATERMARK_LAG_MS behind
--   its watermark, per such window (critical).
-- fault_rate_exceeded: more than HEALTH_MAX_FAULTS_PER_WINDOW on-time fault
--   events across all sites per window (critical).

CREATE TABLE health_alerts (
  record_type  VARCHAR,
  reason       VARCHAR,
  severity     VARCHAR,
  gap_ms       BIGINT,
  window_start TIMESTAMP,
  window_end   TIMESTAMP,
  max_lag_ms   BIGINT,
  threshold_ms BIGINT,
  resumed_at   TIMESTAMP,
  late_events  BIGINT,
  fault_count  BIGINT,
  ceiling      BIGINT
) WITH (connector = 'stdout', tag = 'HEALTH_ALERT', omit_nulls = 'true');

CREATE VIEW all_events AS
SELECT order_ts AS ts, event_time FROM orders
UNION ALL
SELECT payment_ts AS ts, event_time FROM payments
UNION ALL
SELECT event_ts AS ts, event_time FROM devices;

INSERT INTO health_alerts (record_type, reason, severity, gap_ms, threshold_ms, resumed_at)
SELECT 'health_alert', 'throughput_below_floor', 'warning', gap_ms, ${MAX_EVENT_GAP_MS:4000}, event_time
FROM (
  SELECT event_time, ts - lag(ts) OVER (ORDER BY event_time) AS gap_ms FROM all_events
)
WHERE gap_ms > ${MAX_EVENT_GAP_MS:4000};

CREATE VIEW late_health AS
SELECT w.start AS window_start, w.end AS window_end, late_events, max_lag_ms
FROM (
  SELECT tumble(INTERVAL '${HEALTH_WINDOW_SECONDS:5}' SECOND) AS w, count(*) AS late_events, max(lag_ms) AS max_lag_ms
  FROM (
    SELECT event_time, lag_ms FROM late_rows(orders)
    UNION ALL SELECT event_time, lag_ms FROM late_rows(payments)
    UNION ALL SELECT event_time, lag_ms FROM late_rows(devices)
  )
  GROUP BY w
);

INSERT INTO health_alerts (record_type, reason, severity, window_start, window_end, late_events, ceiling)
SELECT 'health_alert', 'late_event_spike', 'warning', window_start, window_end, late_events, ${MAX_LATE_EVENTS_PER_WINDOW:0}
FROM late_health WHERE late_events > ${MAX_LATE_EVENTS_PER_WINDOW:0};

INSERT INTO health_alerts (record_type, reason, severity, window_start, window_end, max_lag_ms, threshold_ms)
SELECT 'health_alert', 'watermark_lag_exceeded', 'critical', window_start, window_end, max_lag_ms, ${MAX_WATERMARK_LAG_MS:5000}
FROM late_health WHERE max_lag_ms > ${MAX_WATERMARK_LAG_MS:5000};

INSERT INTO health_alerts (record_type, reason, severity, window_start, window_end, fault_count, ceiling)
SELECT 'health_alert', 'fault_rate_exceeded', 'critical', w.start, w.end, fault_count, ${HEALTH_MAX_FAULTS_PER_WINDOW:4}
FROM (
  SELECT tumble(INTERVAL '${HEALTH_WINDOW_SECONDS:5}' SECOND) AS w, count(*) AS fault_count
  FROM devices WHERE event_type = 'fault'
  GROUP BY w
  HAVING count(*) > ${HEALTH_MAX_FAULTS_PER_WINDOW:4}
);
