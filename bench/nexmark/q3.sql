-- Nexmark q3, local item suggestion: auctions of category 10 by sellers in
-- Oregon, Idaho or California. A regular join: people and auctions are kept
-- for the life of the job, and every auction meets its seller whenever
-- either arrives.
CREATE TABLE person (
  id BIGINT NOT NULL, name VARCHAR, email_address VARCHAR, credit_card VARCHAR,
  city VARCHAR, state VARCHAR, date_time TIMESTAMP NOT NULL, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'nexmark', stream = 'person', events = '${EVENTS:10000000}', rate = '${RATE:10000}');

CREATE TABLE auction (
  id BIGINT NOT NULL, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, reserve BIGINT,
  date_time TIMESTAMP NOT NULL, expires TIMESTAMP, seller BIGINT NOT NULL, category BIGINT NOT NULL, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'nexmark', stream = 'auction', events = '${EVENTS:10000000}', rate = '${RATE:10000}');

CREATE TABLE q3 (name VARCHAR, city VARCHAR, state VARCHAR, id BIGINT) WITH (connector = '${SINK:blackhole}');

INSERT INTO q3
SELECT P.name, P.city, P.state, A.id
FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
