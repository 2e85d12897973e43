-- fail: 'a' is read by a query that inserts into it, directly or through others
CREATE TABLE a (k VARCHAR);
CREATE TABLE b (k VARCHAR);
INSERT INTO b SELECT k FROM a;
INSERT INTO a SELECT k FROM b;
SELECT * FROM a;
