-- fail: fail_window_time_lost.sql:8:8: a window needs event time, but its input has none: the rows of a join without a time bound have no event time
-- The event time is carried through projections, views and unions, not
-- through a join without a time bound. (A table that declares no event time
-- at all is windowed by arrival time, as Arroyo does.)
CREATE TABLE a (k VARCHAR, ts BIGINT, et TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED, WATERMARK FOR et AS et) WITH (connector = 'file', path = 'unused.ndjson');
CREATE TABLE b (k VARCHAR, ts BIGINT, et TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED, WATERMARK FOR et AS et) WITH (connector = 'file', path = 'unused.ndjson');

SELECT tumble(INTERVAL '1' SECOND) AS w, count(*) FROM (SELECT a.k FROM a JOIN b ON a.k = b.k) GROUP BY w;
