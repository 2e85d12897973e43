-- Writes the reference pipeline's three streams from NDJSON files into
-- Kafka topics, each keyed by the column the pipeline joins or groups it by
-- (so its records are partitioned by it):
--
--   eddy run examples/kafka/load_topics.sql --set KAFKA=127.0.0.1:9092 --set DIR=.
--
-- reads DIR/orders.ndjson, DIR/payments.ndjson and DIR/devices.ndjson (as
-- `eddy generate --stream NAME` writes them).

CREATE TABLE orders_file (
  order_id VARCHAR NOT NULL, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT NOT NULL, country VARCHAR
) WITH (connector = 'file', path = '${DIR:.}/orders.ndjson');
CREATE TABLE payments_file (
  payment_id VARCHAR NOT NULL, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT NOT NULL, method VARCHAR
) WITH (connector = 'file', path = '${DIR:.}/payments.ndjson');
CREATE TABLE devices_file (
  device_id VARCHAR NOT NULL, site_id VARCHAR, event_type VARCHAR, status VARCHAR, event_ts BIGINT NOT NULL
) WITH (connector = 'file', path = '${DIR:.}/devices.ndjson');

CREATE TABLE orders_topic (
  order_id VARCHAR NOT NULL, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT NOT NULL, country VARCHAR
) WITH (connector = 'kafka', bootstrap_servers = '${KAFKA:127.0.0.1:9092}', topic = 'orders',
        key_column = 'order_id', delivery = 'at_least_once');
CREATE TABLE payments_topic (
  payment_id VARCHAR NOT NULL, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT NOT NULL, method VARCHAR
) WITH (connector = 'kafka', bootstrap_servers = '${KAFKA:127.0.0.1:9092}', topic = 'payments',
        key_column = 'order_id', delivery = 'at_least_once');
CREATE TABLE devices_topic (
  device_id VARCHAR NOT NULL, site_id VARCHAR, event_type VARCHAR, status VARCHAR, event_ts BIGINT NOT NULL
) WITH (connector = 'kafka', bootstrap_servers = '${KAFKA:127.0.0.1:9092}', topic = 'devices',
        key_column = 'device_id', delivery = 'at_least_once');

INSERT INTO orders_topic SELECT * FROM orders_file;
INSERT INTO payments_topic SELECT * FROM payments_file;
INSERT INTO devices_topic SELECT * FROM devices_file;
