-- origin: https://nightlies.apache.org/flink/flink-docs-release-1.20/docs/dev/table/sql/queries/joins/ (Regular Joins)
-- expected: worked out from the input by check_expected.py

CREATE TABLE Orders (id INT, order_time TIMESTAMP(3), amount DOUBLE, product STRING, user_id STRING,
  WATERMARK FOR order_time AS order_time - INTERVAL '1' MINUTE) WITH (connector = 'file', path = '${DATA}/orders.ndjson');
CREATE TABLE Shipments (order_id INT, ship_time TIMESTAMP(3),
  WATERMARK FOR ship_time AS ship_time - INTERVAL '1' MINUTE) WITH (connector = 'file', path = '${DATA}/shipments.ndjson');

SELECT * FROM Orders
INNER JOIN Shipments
ON Orders.id = Shipments.order_id;
