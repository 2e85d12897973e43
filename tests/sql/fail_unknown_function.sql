-- fail: fail_unknown_function.sql:10:23: Invalid function 'sqrtt'; Possible function 'sqrt'
-- An unknown function is named at its position, with the closest known one.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

SELECT user_id, round(sqrtt(amount), 2) AS r FROM clicks;
