-- Writes the Nexmark event stream of ddl.sql (every event: person, auction
-- and bid in the suite's proportions) to one NDJSON file that ddl_file.sql
-- reads back, for eddy and Apache Flink alike. Each kind is a JSON object
-- and the other two are null, as Flink's JSON format writes a ROW column.
-- Timestamps are written without a zone ("2015-07-15T00:00:00.001"), the
-- ISO-8601 spelling Flink's JSON format reads into a TIMESTAMP(3):
--   eddy run bench/nexmark/flink/ddl.sql bench/nexmark/flink/events.sql \
--     --set TPS=10000000 --set EVENTS_NUM=10000000 --set PERSON_PROPORTION=1 \
--     --set AUCTION_PROPORTION=3 --set BID_PROPORTION=46 --set EVENTS_FILE=/tmp/events.ndjson
CREATE TABLE events_file (
    event_type int,
    person ROW<id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR,
               city VARCHAR, state VARCHAR, `dateTime` VARCHAR, extra VARCHAR>,
    auction ROW<id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT,
                reserve BIGINT, `dateTime` VARCHAR, expires VARCHAR, seller BIGINT,
                category BIGINT, extra VARCHAR>,
    bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
            `dateTime` VARCHAR, extra VARCHAR>
) WITH ('connector' = 'filesystem', 'path' = '${EVENTS_FILE}', 'format' = 'json');

INSERT INTO events_file
SELECT
    event_type,
    CASE WHEN event_type = 0 THEN named_struct(
        'id', person.id, 'name', person.name, 'emailAddress', person.emailAddress,
        'creditCard', person.creditCard, 'city', person.city, 'state', person.state,
        'dateTime', to_char(person.`dateTime`, '%Y-%m-%dT%H:%M:%S%.3f'), 'extra', person.extra) END,
    CASE WHEN event_type = 1 THEN named_struct(
        'id', auction.id, 'itemName', auction.itemName, 'description', auction.description,
        'initialBid', auction.initialBid, 'reserve', auction.reserve,
        'dateTime', to_char(auction.`dateTime`, '%Y-%m-%dT%H:%M:%S%.3f'),
        'expires', to_char(auction.expires, '%Y-%m-%dT%H:%M:%S%.3f'),
        'seller', auction.seller, 'category', auction.category, 'extra', auction.extra) END,
    CASE WHEN event_type = 2 THEN named_struct(
        'auction', bid.auction, 'bidder', bid.bidder, 'price', bid.price, 'channel', bid.channel,
        'url', bid.url, 'dateTime', to_char(bid.`dateTime`, '%Y-%m-%dT%H:%M:%S%.3f'), 'extra', bid.extra) END
FROM datagen;
