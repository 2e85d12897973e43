-- A window join as Arroyo writes it: two window aggregates joined on their
-- windows' start (a.window.start = b.window.start) are joined window by
-- window (an interval join of zero width on their event time), so each
-- pair comes once, when both windows have fired, and the result keeps
-- event time for a window after it.
CREATE TABLE clicks (
  user_id VARCHAR, page VARCHAR, amount DOUBLE, ts BIGINT,
  event_time TIMESTAMP(3) GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

CREATE VIEW counts AS
SELECT tumble(INTERVAL '10' SECOND) AS window, user_id, count(*) AS n FROM clicks GROUP BY 1, 2;
CREATE VIEW spend AS
SELECT tumble(INTERVAL '10' SECOND) AS window, user_id, round(sum(amount), 2) AS total FROM clicks GROUP BY 1, 2;

SELECT c.window.start AS window_start, c.user_id, c.n, s.total
FROM counts c JOIN spend s ON c.window.start = s.window.start AND c.user_id = s.user_id;

SELECT w.start AS minute, count(*) AS pairs FROM (
  SELECT tumble(INTERVAL '1' MINUTE) AS w, c.user_id
  FROM counts c JOIN spend s ON c.window.start = s.window.start AND c.user_id = s.user_id
  GROUP BY 1, 2)
GROUP BY 1;
