-- fail: fail_flink_raw_column.sql:2:30: RAW holds serialized Java objects, and eddy runs no Java: declare the column BYTES for its bytes, or STRING
CREATE TABLE t (id BIGINT, r RAW('java.util.UUID', 'AAECAw==')) WITH (connector = 'file', path = 'x.ndjson');
SELECT id FROM t;
