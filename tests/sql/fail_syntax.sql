-- fail: fail_syntax.sql:4:
CREATE TABLE t (a DOUBLE) WITH (connector = 'file', path = 'x.ndjson');
SELECT a
FROM t WHERE ,;
