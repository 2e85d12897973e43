-- fail: 'quiet' is read but nothing is inserted into it
CREATE TABLE quiet (k VARCHAR, n BIGINT);
SELECT k, n FROM quiet;
