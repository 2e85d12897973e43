-- fail: late_rows(plain): no source table 'plain' with a WATERMARK
CREATE TABLE plain (k VARCHAR) WITH (connector = 'file', path = 'x.ndjson');
SELECT * FROM late_rows(plain);
