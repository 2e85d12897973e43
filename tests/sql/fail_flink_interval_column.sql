-- fail: fail_flink_interval_column.sql:2:33: Flink's INTERVAL types are not column types in eddy: declare a duration as BIGINT milliseconds
CREATE TABLE t (id BIGINT, wait INTERVAL DAY TO SECOND(3)) WITH (connector = 'file', path = 'x.ndjson');
SELECT id FROM t;
