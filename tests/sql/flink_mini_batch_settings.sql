-- Flink's mini-batch settings are accepted (eddy always moves rows in
-- batches): the results are those without them.
SET 'table.exec.mini-batch.enabled' = 'true';
SET 'table.exec.mini-batch.allow-latency' = '2 s';
SET 'table.exec.mini-batch.size' = '5000';
CREATE TABLE visits (`userId` VARCHAR NOT NULL, `eventTs` BIGINT)
  WITH (connector = 'file', path = '${DATA}/camel_case.ndjson');

SELECT `userId`, `eventTs` FROM visits WHERE `eventTs` > 1700000010000;
