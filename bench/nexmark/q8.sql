-- Nexmark q8, monitor new users: people who opened an auction in the same
-- 10-second window in which they registered.
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

CREATE TABLE q8 (id BIGINT, name VARCHAR, starttime TIMESTAMP) WITH (connector = '${SINK:blackhole}');

INSERT INTO q8
SELECT P.id, P.name, P.starttime
FROM (
  SELECT id, name, window_start AS starttime, window_end AS endtime
  FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
  GROUP BY id, name, window_start, window_end
) P
JOIN (
  SELECT seller, window_start AS starttime, window_end AS endtime
  FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
  GROUP BY seller, window_start, window_end
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;
