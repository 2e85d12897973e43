-- The Nexmark event stream of ddl.sql read back from an NDJSON file, so that
-- eddy and Apache Flink run the suite's queries over the same events: the
-- same table, columns, computed event time, watermark and views as ddl.sql
-- (the suite's ddl_gen.sql and ddl_views.sql), with the suite's `nexmark`
-- connector replaced by Flink's `filesystem` connector and its JSON format.
-- bench/nexmark_flink.sh writes the file with eddy (nexmark_events.sql) and
-- runs each query on both engines:
--   eddy run bench/nexmark/flink/ddl_file.sql bench/nexmark/flink/q5.sql \
--     --set EVENTS_FILE=/tmp/events.ndjson

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
    'connector' = 'filesystem',
    'path' = '${EVENTS_FILE}',
    'format' = 'json',
    'json.timestamp-format.standard' = 'ISO-8601'
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
