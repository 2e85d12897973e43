-- fail: fail_missing_parameter.sql:3:27: parameter ${LIMIT_AMOUNT} has no default
CREATE TABLE t (a DOUBLE) WITH (connector = 'file', path = 'x.ndjson');
SELECT a FROM t WHERE a > ${LIMIT_AMOUNT};
