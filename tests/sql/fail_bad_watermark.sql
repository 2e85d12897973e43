-- fail: watermark column 'nope' is not a column of 't'
CREATE TABLE t (a DOUBLE, ts TIMESTAMP, WATERMARK FOR nope AS nope - INTERVAL '1' SECOND) WITH (connector = 'file', path = 'x.ndjson');
SELECT a FROM t;
