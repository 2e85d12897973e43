-- fail: fail_values_window.sql:4:36: a window needs event time, but its input has none: a VALUES list has no event time
-- A VALUES list has no event time, so no window can follow it.
CREATE VIEW t (k, ts) AS VALUES ('a', TIMESTAMP '2023-11-14 22:13:20'), ('b', TIMESTAMP '2023-11-14 22:13:21');
SELECT k, count(*) AS n FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end;
