-- The Nexmark event stream as the Nexmark suite's Flink DDL declares it
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries:
-- ddl_gen.sql and ddl_views.sql): one table of every event, each kind a ROW
-- column, the event time a computed column with a quoted camel-case name,
-- and a view per kind. Parameters as the suite names them:
--   eddy run bench/nexmark/flink/ddl.sql bench/nexmark/flink/q5.sql \
--     --set TPS=10000 --set EVENTS_NUM=1000000 \
--     --set PERSON_PROPORTION=1 --set AUCTION_PROPORTION=3 --set BID_PROPORTION=46

-- The suite's files are Flink SQL, where a name means what it says,
-- quoted or not (q23 reads `A.dateTime` unquoted).
SET 'sql.case-sensitive' = 'true';

CREATE TABLE datagen (
    event_type int,
    person ROW<
        id BIGINT,
        name VARCHAR,
        emailAddress VARCHAR,
        creditCard VARCHAR,
        city VARCHAR,
        state VARCHAR,
        `dateTime` TIMESTAMP(3),
        extra VARCHAR>,
    auction ROW<
        id BIGINT,
        itemName VARCHAR,
        description VARCHAR,
        initialBid BIGINT,
        reserve BIGINT,
        `dateTime` TIMESTAMP(3),
        expires TIMESTAMP(3),
        seller BIGINT,
        category BIGINT,
        extra VARCHAR>,
    bid ROW<
        auction BIGINT,
        bidder BIGINT,
        price BIGINT,
        channel VARCHAR,
        url VARCHAR,
        `dateTime` TIMESTAMP(3),
        extra VARCHAR>,
    `dateTime` AS
        CASE
            WHEN event_type = 0 THEN person.`dateTime`
            WHEN event_type = 1 THEN auction.`dateTime`
            ELSE bid.`dateTime`
        END,
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH (
    'connector' = 'nexmark',
    'first-event.rate' = '${TPS}',
    'next-event.rate' = '${TPS}',
    'events.num' = '${EVENTS_NUM}',
    'person.proportion' = '${PERSON_PROPORTION}',
    'auction.proportion' = '${AUCTION_PROPORTION}',
    'bid.proportion' = '${BID_PROPORTION}'
);

CREATE VIEW person AS
SELECT person.id, person.name, person.emailAddress, person.creditCard,
       person.city, person.state, `dateTime`, person.extra
FROM datagen WHERE event_type = 0;

CREATE VIEW auction AS
SELECT auction.id, auction.itemName, auction.description, auction.initialBid,
       auction.reserve, `dateTime`, auction.expires, auction.seller,
       auction.category, auction.extra
FROM datagen WHERE event_type = 1;

CREATE VIEW bid AS
SELECT bid.auction, bid.bidder, bid.price, bid.channel, bid.url, `dateTime`, bid.extra
FROM datagen WHERE event_type = 2;
