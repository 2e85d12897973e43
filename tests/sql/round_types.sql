-- ROUND keeps its argument's kind as Flink's and Arroyo's do: integers stay
-- integers (a negative place count rounds to tens), a DECIMAL stays a
-- DECIMAL rounded half away from zero at the places asked for, a DOUBLE
-- stays a DOUBLE.
CREATE TABLE typed (
  k STRING,
  amount DEC(10, 2),
  at TIMESTAMP_LTZ(3),
  WATERMARK FOR at AS at - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/round_values.ndjson');

SELECT k, amount, round(amount, 1) AS one_place, round(amount) AS whole,
       round(CAST(amount * 100 AS BIGINT), -2) AS cents_to_hundreds,
       round(CAST(amount AS DOUBLE), 1) AS as_double
FROM typed;
