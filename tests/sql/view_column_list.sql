-- CREATE VIEW v (a, b, ...) names the query's columns in order.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

CREATE VIEW spend (who, what, how_much) AS SELECT user_id, page, amount FROM clicks;

SELECT who, how_much FROM spend WHERE what = 'checkout';
