-- fail: fail_metadata_type.sql:4:19: column 'changed' reads 'value.source.timestamp', a time: declare it TIMESTAMP(3) (or BIGINT for epoch milliseconds), not Utf8View
-- A metadata column holds a change's time.
CREATE TABLE rates (k VARCHAR NOT NULL, rate BIGINT,
  changed VARCHAR METADATA FROM 'value.source.timestamp',
  PRIMARY KEY (k) NOT ENFORCED
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'debezium-json');
SELECT k, rate, changed FROM rates;
