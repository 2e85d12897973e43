-- Writes the payments stream into a Delta table, one commit per
-- checkpoint (with --state-dir), or per rolled file and at the end:
--
--   eddy run examples/delta/payments_to_lake.sql --set LAKE=lake --set DIR=.
--
-- reads DIR/payments.ndjson (as `eddy generate --stream payments` writes
-- it). Any Delta reader (Spark, DuckDB's delta extension, delta-rs,
-- polars) reads LAKE/payments; backfill_then_live.sql reads it back.

CREATE TABLE payments_file (
  payment_id VARCHAR NOT NULL, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT NOT NULL, method VARCHAR
) WITH (connector = 'file', path = '${DIR:.}/payments.ndjson');

CREATE TABLE lake_payments (
  payment_id VARCHAR NOT NULL, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT NOT NULL, method VARCHAR
) WITH (connector = 'delta', path = '${LAKE:lake}/payments');

INSERT INTO lake_payments SELECT * FROM payments_file;
