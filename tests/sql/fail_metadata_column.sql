-- fail: fail_metadata_column.sql:4:24: column 'changed': 'value.op_ts' is not a Debezium metadata key; known: 'value.source.timestamp'
-- A metadata column names one of the keys a Debezium envelope has.
CREATE TABLE rates (k VARCHAR NOT NULL, rate BIGINT,
  changed TIMESTAMP(3) METADATA FROM 'value.op_ts' VIRTUAL,
  PRIMARY KEY (k) NOT ENFORCED
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'debezium-json');
SELECT k, rate, changed FROM rates;
