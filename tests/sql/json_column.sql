-- A column declared JSON holds each value's JSON text as written (objects,
-- arrays, numbers; a string stays itself, null stays NULL), ready for
-- JSON_VALUE; a bad line is still reported with its line.
CREATE TABLE events (id BIGINT, payload JSON, ts BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/json_payloads.ndjson');

SELECT id, payload, JSON_VALUE(payload, '$.user.name') AS name, JSON_VALUE(payload, '$.items[1]') AS second
FROM events;

SELECT line, reason FROM bad_rows(events);
