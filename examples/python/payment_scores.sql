-- Python functions over the reference pipeline's payments (run with
-- queries/00_sources.sql: eddy run queries/00_sources.sql examples/python/).
-- On a server they need eddy serve --allow-python-udfs.
--
-- risk_band, amount_cents: called once per row with Python values; plain
-- Python, so any python3 runs them (WITH (vectorized = true) would call
-- them once per batch with pyarrow arrays, given pyarrow).
-- p90: an aggregate: a class whose instances eddy checkpoints (pickled).

CREATE FUNCTION risk_band(amount DOUBLE, method VARCHAR) RETURNS VARCHAR
LANGUAGE PYTHON AS $$
def risk_band(amount, method):
    if amount is None:
        return None
    score = amount / 100.0 + (2.0 if method == 'crypto' else 0.0)
    return 'high' if score >= 5 else 'medium' if score >= 2 else 'low'
$$;

CREATE FUNCTION amount_cents(amount DOUBLE) RETURNS BIGINT
LANGUAGE PYTHON AS $$
def amount_cents(amount):
    return None if amount is None else round(amount * 100)
$$;

CREATE AGGREGATE p90(x DOUBLE) RETURNS DOUBLE LANGUAGE PYTHON AS $$
class p90:
    def __init__(self):
        self.values = []
    def accumulate(self, x):
        if x is not None:
            self.values.append(x)
    def retract(self, x):
        if x is not None:
            self.values.remove(x)
    def merge(self, other):
        self.values.extend(other.values)
    def finish(self):
        if not self.values:
            return None
        ordered = sorted(self.values)
        return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
$$;

SELECT window_start, method, count(*) AS payments, p90(paid_amount) AS p90_amount,
       risk_band(max(paid_amount), method) AS worst_band,
       sum(amount_cents(paid_amount)) AS total_cents
FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, method;
