-- An updating join that keeps every row of both sides: each order with its
-- payments, an order without one NULL-padded until a payment comes.
CREATE TABLE paid (id STRING, amount BIGINT, paid BIGINT)
WITH ('connector' = 'blackhole');

INSERT INTO paid SELECT o.id, o.amount, p.paid FROM orders o LEFT JOIN payments p ON o.id = p.id;
